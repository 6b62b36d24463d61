import type { JobHelpers, TaskList } from 'graphile-worker'
import type { App } from '../context.ts'
import { analyzeTables } from '../db/analyze.ts'
import { TASKS } from '../db/jobs.ts'
import { scoreRecordsJob } from '../scoring/batch.ts'
import { scoreDailyRun } from '../scoring/daily.ts'
import { aggregateEvents } from '../tracking/aggregate.ts'
import { applyEventsOfAccount } from '../tracking/apply.ts'
import { processUploadJob } from '../uploads/process.ts'
import { deliverWebhook } from '../webhooks/deliver.ts'

// The task list: each task name (db/jobs.ts builds their specs) and the domain function it runs.
// The payloads are what those builders wrote.
type Run = (app: App, payload: never, helpers: JobHelpers) => Promise<unknown>
const runs: Record<(typeof TASKS)[keyof typeof TASKS], Run> = {
  [TASKS.processUpload]: processUploadJob,
  [TASKS.applyEvents]: applyEventsOfAccount,
  [TASKS.aggregateEvents]: aggregateEvents,
  [TASKS.scoreRecords]: scoreRecordsJob,
  [TASKS.scoreDaily]: scoreDailyRun,
  [TASKS.deliverWebhook]: deliverWebhook,
  [TASKS.analyzeTables]: (app, payload) => analyzeTables(app.sql, payload),
}

export const taskList = (app: App): TaskList =>
  Object.fromEntries(
    Object.entries(runs).map(([name, run]) => [
      name,
      async (payload: unknown, helpers: JobHelpers) => void (await run(app, payload as never, helpers)),
    ]),
  )

// graphile-worker crontab lines (https://worker.graphile.org/docs/cron); one per recurring task.
export const crontab: string[] = [
  // Daily at 01:00 UTC: tracked events -> today's metric snapshots (fans out one job per account).
  `0 1 * * * ${TASKS.aggregateEvents}`,
  // Daily at 01:30 UTC: time-dependent scores and automatic churn (fans out one job per account).
  `30 1 * * * ${TASKS.scoreDaily}`,
]
