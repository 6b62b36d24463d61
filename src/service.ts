import { startHttp } from './api/server.ts'
import { isDatabaseAway } from './db/sqlstate.ts'
import { startWorker } from './jobs/worker.ts'
import { connect } from './db/client.ts'
import { keyChecker } from './db/key-check.ts'
import { migrate } from './db/migrate.ts'
import { createLog } from './log.ts'
import type { Config } from './config.ts'
import type { App } from './context.ts'

export interface Service {
  app: App
  port?: number
  stop: () => Promise<void>
}

// graphile-worker can leave a rejection unhandled when the database goes away mid-batch
// (batchFailJobs retries, possibly past its own pool's end at shutdown), which would end the
// process on Node 20. A lost connection is survivable (the pools reconnect) and a closed pool
// means the process is stopping, so both are logged; any other unhandled rejection still ends
// the process.
const survivable = (err: unknown) =>
  isDatabaseAway(err) ||
  /^Cannot use a pool after calling end/.test(String((err as Error)?.message))
let guarded = false
const guardUnhandledRejections = (log: App['log']) => {
  if (guarded) return
  guarded = true
  process.on('unhandledRejection', (err) => {
    log('error', 'unhandled rejection', { error: String((err as Error)?.stack ?? err) })
    if (!survivable(err)) process.exit(1)
  })
}

// The operator's requests come one or two at a time.
const ADMIN_POOL_SIZE = 4

// One process can serve HTTP, run jobs, or both; any number of them share one Postgres.
export const startService = async (
  config: Config,
  url: string,
  parts: { http: boolean; worker: boolean; migrate?: boolean },
): Promise<Service> => {
  const log = createLog(config.logLevel)
  const api = { role: 'api', parameters: config.databaseApiOptions } as const
  const sql = connect(url, { max: 20, ...api })
  const heavy = connect(url, { max: config.heavyPoolSize, ...api })
  const admin = connect(url, { max: ADMIN_POOL_SIZE, role: 'admin' })
  const countsLost = (err: unknown) =>
    log('warn', 'request counts not saved', { error: String(err) })
  const keys = keyChecker(sql, countsLost)
  const app: App = { sql, heavy, admin, config, log, keys }
  guardUnhandledRejections(log)
  if (parts.migrate !== false) await migrate(admin, url)
  const runner = parts.worker ? await startWorker(app, url) : undefined
  const http = parts.http ? await startHttp(app) : undefined
  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      if (http) await http.stop()
      if (runner) await runner.stop()
      await keys.flush().catch(countsLost)
      await Promise.all([sql, heavy, admin].map((pool) => pool.end({ timeout: 5 })))
    })())
  return { app, port: http?.port, stop }
}
