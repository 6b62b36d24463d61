import { type Runner, run } from 'graphile-worker'
import pg from 'pg'
import type { App } from '../context.ts'
import { applicationName, connect } from '../db/client.ts'
import { quietLogger } from '../db/migrate.ts'
import { startRecovery } from '../db/recovery.ts'
import { crontab, taskList } from './tasks.ts'

export const startWorker = async (serving: App, url: string): Promise<Runner> => {
  // The tasks' statements have a pool of their own too, one connection per job running at once:
  // a busy API never makes a job wait for a connection, nor a busy worker a request.
  const sql = connect(url, { max: serving.config.workerConcurrency + 2, role: 'worker' })
  const app = { ...serving, sql, heavy: sql, admin: sql }
  // Heartbeats and recovery on a connection of their own, which no number of running jobs can take.
  const beats = connect(url, { max: 1, role: 'worker' })
  const recovery = startRecovery({ ...app, sql: beats })
  // Our own pool: graphile-worker ends a pool it made without waiting, after removing its error
  // handler, so a database stopping right after the worker (serve with the embedded server) could
  // kill an idle connection of it and crash the process on the unhandled 'error'.
  // Its commits (taking, completing and failing jobs) do not wait for the WAL flush: the account
  // queue's next merge waited on the completion's flush (docs/benchmarks.md). A completion lost
  // in a database crash runs its job again, as a crash during the job does, which every task
  // allows (an upload is claimed once: uploads/process.ts). The tasks' statements run on `sql`.
  const pool = new pg.Pool({
    connectionString: url,
    max: Math.max(10, app.config.workerConcurrency + 2),
    application_name: applicationName('worker'),
    options: '-c synchronous_commit=off',
  })
  const lost = (err: Error) => app.log('debug', 'worker connection lost', { error: String(err) })
  pool.on('error', lost)
  pool.on('connect', (client) => client.on('error', lost))
  const release = async () => {
    await recovery.stop()
    await Promise.all([pool.end(), sql.end({ timeout: 5 }), beats.end({ timeout: 5 })])
  }
  const runner = await run({
    pgPool: pool,
    concurrency: app.config.workerConcurrency,
    noHandleSignals: true,
    logger: quietLogger,
    taskList: taskList(app),
    crontab: crontab(app.config).join('\n'),
    // No localQueue, although it is faster (docs/benchmarks.md): in 0.17 it runs several jobs
    // of one named queue at once (graphile/worker#621), and each account's uploads must be
    // merged in order. A job waiting behind its account queue's lock is seen only at the next
    // poll: 200 ms, not 2 s.
    preset: { worker: { pollInterval: 200 } },
    events: recovery.events,
  } as Parameters<typeof run>[0]).catch(async (err) => {
    await release()
    throw err
  })
  await recovery.recover()
  // Heartbeats go on until the jobs have drained, so a stopping worker never looks dead.
  return {
    ...runner,
    stop: async (reason) => {
      await runner.stop(reason)
      await release()
    },
  }
}
