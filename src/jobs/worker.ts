import { type Runner, run } from 'graphile-worker'
import type { App } from '../context.ts'
import { quietLogger } from '../db/migrate.ts'
import { startRecovery } from '../db/recovery.ts'
import { instrumentTasks } from '../metrics.ts'
import { crontab, taskList } from './tasks.ts'

export const startWorker = async (app: App, url: string): Promise<Runner> => {
  const recovery = startRecovery(app)
  const runner = await run({
    connectionString: url,
    concurrency: app.config.workerConcurrency,
    noHandleSignals: true,
    logger: quietLogger,
    // instrumentTasks counts and times every task for /metrics.
    taskList: instrumentTasks(taskList(app)),
    crontab: crontab.join('\n'),
    // No localQueue, although STACK-NOTES measured 12-18k jobs/s with it against 2k without: in
    // 0.17 it runs several jobs of one named queue at once (graphile/worker#621), and each
    // account's uploads must be merged one at a time, in order. One job per upload, delivery or
    // tracking request is far below 2k/s. New jobs arrive by LISTEN/NOTIFY, but one waiting behind
    // its account queue's lock (an upload behind the previous upload) is only seen at the next
    // poll: 200 ms instead of 2 s keeps webhooks prompt.
    preset: { worker: { pollInterval: 200 } },
    events: recovery.events,
  } as Parameters<typeof run>[0]).catch(async (err) => {
    await recovery.stop()
    throw err
  })
  await recovery.recover()
  // Heartbeats go on until the jobs have drained, so a stopping worker never looks dead.
  return {
    ...runner,
    stop: async (reason) => {
      await runner.stop(reason)
      await recovery.stop()
    },
  }
}
