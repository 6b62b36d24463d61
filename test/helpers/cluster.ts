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

// `home`: another PostgreSQL installation's folder (bin/ inside) instead of the embedded one.
export const startThrowawayCluster = async (prefix: string, settings: string[], home?: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  // As root the cluster runs as the postgres user, who must be able to enter the folder.
  chmodSync(dir, 0o755)
  const pg = await startEmbedded(join(dir, 'pg'), await freePort(), settings, home)
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
  return { url: url.toString(), drop: () => onCluster(clusterUrl, `drop database if exists ${name} with (force)`) }
}
