import { run, type Runner, type TaskList } from 'graphile-worker'
import { quietLogger } from '../db/migrate.ts'
import { processUploadTask } from './process-upload.ts'
import { applyEventsTask } from './apply-events.ts'
import { aggregateEventsTask } from './aggregate-events.ts'
import { crontab } from './schedule.ts'
import type { App } from '../http/types.ts'

// Each task is a small module in src/jobs; they all receive the same App (postgres.js pool).
export const taskList = (app: App): TaskList => ({
  process_upload: processUploadTask(app),
  apply_events: applyEventsTask(app),
  aggregate_events: aggregateEventsTask(app),
})

export const startWorker = (app: App, url: string): Promise<Runner> =>
  run({
    connectionString: url,
    concurrency: app.config.workerConcurrency,
    noHandleSignals: true,
    logger: quietLogger,
    taskList: taskList(app),
    crontab: crontab.join('\n'),
    // Batching settings measured in STACK-NOTES: 12-18k jobs/s instead of 2k.
    preset: { worker: { localQueue: { size: 50 }, completeJobBatchDelay: 0 } },
  } as Parameters<typeof run>[0])
