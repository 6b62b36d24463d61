import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { startEmbedded } from '../src/db/embedded.ts'

// One row of the results table. `baseline` is the same-run reference the target is a ratio of.
export interface Row {
  bench: string
  metric: string
  value: number
  unit: string
  baseline?: number
  ratio?: number
  target?: string
}

export interface BenchContext {
  // A new empty database in the run's cluster.
  database: () => Promise<string>
  // Rows printed as they come and written to bench/results.json at the end.
  report: (row: Row) => void
}

export const freePort = () => new Promise<number>((resolve) => {
  const server = createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number }
    server.close(() => resolve(port))
  })
})

// BENCH_DATABASE_URL, or an embedded cluster made for this run and removed after it.
export const startCluster = async () => {
  if (process.env.BENCH_DATABASE_URL) return { url: process.env.BENCH_DATABASE_URL, stop: async () => {} }
  const dir = mkdtempSync(join(tmpdir(), 'service-bench-'))
  chmodSync(dir, 0o755)
  const pg = await startEmbedded(join(dir, 'pg'), await freePort(), ['-c', 'max_connections=300', '-c', 'shared_buffers=512MB'])
  return { url: pg.url, stop: async () => { await pg.stop(); rmSync(dir, { recursive: true, force: true }) } }
}

export const createDatabase = async (clusterUrl: string) => {
  const name = `b_${randomBytes(5).toString('hex')}`
  const admin = postgres(clusterUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  const url = new URL(clusterUrl)
  url.pathname = `/${name}`
  return url.toString()
}

export const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN

// Resident memory of a process in MB; NaN once it is gone.
export const rssMb = (pid: number) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024
  } catch {
    return NaN
  }
}
