import { readdirSync, readFileSync } from 'node:fs'
import { loadConfig } from '../src/config.ts'
import { startService } from '../src/service.ts'
import {
  createDatabase as createClusterDatabase,
  startThrowawayCluster,
} from '../test/helpers/cluster.ts'

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

// BENCH_DATABASE_URL, or an embedded cluster made for this run and removed after it.
export const startCluster = async () =>
  process.env.BENCH_DATABASE_URL
    ? { url: process.env.BENCH_DATABASE_URL, stop: async () => {} }
    : startThrowawayCluster('service-bench-', [
        '-c',
        'max_connections=300',
        '-c',
        'shared_buffers=512MB',
      ])

// Each database made for the run, by its URL, with what drops it.
const made = new Map<string, () => Promise<void>>()
export const createDatabase = async (clusterUrl: string) => {
  const { url, drop } = await createClusterDatabase(clusterUrl, 'b')
  made.set(url, drop)
  return url
}

// Drops a database of the run once its side of a comparison is measured: autovacuum would
// otherwise vacuum and analyze its tables while the next side runs, in that side's time and in the
// cluster's CPU (clusterCpuNs counts every process of the cluster).
export const dropDatabase = (url: string) => made.get(url)?.()

export const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN

export const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  )

// The run whose key is the median (the same index as median's), so that a run's other figures
// are reported from that one run.
export const medianBy = <T>(runs: T[], key: (run: T) => number) =>
  [...runs].sort((a, b) => key(a) - key(b))[Math.floor(runs.length / 2)]

// Resident memory of a process in MB; NaN once it is gone.
export const rssMb = (pid: number) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024
  } catch {
    return NaN
  }
}

// CPU time a process has run, all its threads (the JavaScript thread, garbage collection, libuv's
// pool), in nanoseconds from the kernel's scheduler statistics; NaN once it is gone.
export const cpuNs = (pid: number) => {
  try {
    return readdirSync(`/proc/${pid}/task`).reduce(
      (sum, task) =>
        sum + Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]),
      0,
    )
  } catch {
    return NaN
  }
}

// /proc/<pid>/stat's fields after the command's name: [0] the state, [1] the parent, [11]-[14] the
// user and system time of the process and of its reaped children, in ticks.
const statFields = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

// A cluster's CPU in nanoseconds: its postmaster's and every live child's (backends, WAL writer,
// checkpointer, autovacuum), and the children it has reaped (an autovacuum worker that ended), from
// /proc. `postmaster` is any backend's parent (parentOf). USER_HZ is 100.
export const clusterCpuNs = (postmaster: number) => {
  let ns = cpuNs(postmaster)
  const reaped = statFields(postmaster)
  ns += (Number(reaped[13]) + Number(reaped[14])) * 1e7
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (Number(statFields(Number(pid))[1]) === postmaster) ns += cpuNs(Number(pid)) || 0
    } catch {
      /* gone meanwhile */
    }
  }
  return ns
}

// The parent of a process: a backend's (pg_backend_pid()) is its cluster's postmaster.
export const parentOf = (pid: number) => Number(statFields(pid)[1])

// The HTTP service alone, for one account's throughput: its rate limit and its share of running
// searches are lifted.
export const unthrottledService = (url: string) =>
  startService(
    {
      ...loadConfig({}),
      port: 0,
      host: '127.0.0.1',
      logLevel: 'warn',
      apiRateLimit: 1_000_000_000,
      expensivePerAccount: 1_000_000_000,
    },
    url,
    { http: true, worker: false, migrate: false },
  )
