// Throwaway PostgreSQL for test and benchmark runs: a free port, an embedded cluster in a temporary
// folder removed on stop, and fresh databases in a cluster.
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { startEmbedded } from '../../src/db/embedded.ts'

export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

// TEST_POSTGRES_PORT: the port test/run.ts's cluster listens on (to reach it with psql while the
// tests run, or through a firewall that opens one port); a free one when unset.
export const pinnedPort = (env: NodeJS.ProcessEnv = process.env): number | undefined => {
  const given = env.TEST_POSTGRES_PORT
  if (given === undefined || given === '') return undefined
  const port = Number(given)
  if (!/^[1-9]\d*$/.test(given) || port > 65535)
    throw new Error(
      `TEST_POSTGRES_PORT must be a port number, 1 to 65535, not ${JSON.stringify(given)}.`,
    )
  return port
}

// `home`: another PostgreSQL installation's folder (bin/ inside) instead of the embedded one.
// `port`: a free one when not given.
export const startThrowawayCluster = async (
  prefix: string,
  settings: string[],
  home?: string,
  port?: number,
) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  // As root the cluster runs as the postgres user, who must be able to enter the folder.
  chmodSync(dir, 0o755)
  const pg = await startEmbedded(join(dir, 'pg'), port ?? (await freePort()), settings, home)
  return {
    url: pg.url,
    stop: async () => {
      await pg.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

const onCluster = async (clusterUrl: string, statement: string) => {
  const admin = postgres(clusterUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(statement)
  await admin.end()
}

export const createDatabase = async (clusterUrl: string, prefix: string) => {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  await onCluster(clusterUrl, `create database ${name}`)
  const url = new URL(clusterUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: () => onCluster(clusterUrl, `drop database if exists ${name} with (force)`),
  }
}
