import type { JobHelpers, TaskList } from 'graphile-worker'
import { runBackup } from '../backups/task.ts'
import type { Config } from '../config.ts'
import type { App } from '../context.ts'
import { trainChurnTask } from '../churn/train.ts'
import { analyzeTables } from '../db/analyze.ts'
import { BACKUP_QUEUE, TASKS } from '../db/jobs.ts'
import { refreshWeekReports } from '../insights/week.ts'
import { scoreRecordsTask } from '../scoring/batch.ts'
import { scoreDailyRun } from '../scoring/daily.ts'
import { runErasure } from '../privacy/erasures.ts'
import { purgeExpired } from '../privacy/retention.ts'
import { recomputeSegments } from '../segments/members.ts'
import { applyEventsOfAccount } from '../tracking/apply.ts'
import { applySegmentOfAccount } from '../tracking/segment-apply.ts'
import { countEvents } from '../tracking/counts.ts'
import { processReceivedUpload } from '../uploads/process.ts'
import { deliverWebhook } from '../webhooks/deliver.ts'

// A task's run takes the payload its spec builder in db/jobs.ts wrote: the only writer of its jobs.
type Run = (app: App, payload: unknown, helpers: JobHelpers) => Promise<unknown>
const task =
  <P>(run: (app: App, payload: P, helpers: JobHelpers) => Promise<unknown>): Run =>
  (app, payload, helpers) =>
    run(app, payload as P, helpers)

// The task list: each task name and the module function it runs.
const runs: Record<(typeof TASKS)[keyof typeof TASKS], Run> = {
  [TASKS.processUpload]: task(processReceivedUpload),
  [TASKS.applyEvents]: task(applyEventsOfAccount),
  [TASKS.applySegment]: task(applySegmentOfAccount),
  [TASKS.countEvents]: task(countEvents),
  [TASKS.scoreRecords]: task(scoreRecordsTask),
  [TASKS.scoreDaily]: task(scoreDailyRun),
  [TASKS.deliverWebhook]: task(deliverWebhook),
  [TASKS.analyzeTables]: task((app, payload: Parameters<typeof analyzeTables>[1]) => analyzeTables(app.sql, payload)),
  [TASKS.recomputeSegments]: task(recomputeSegments),
  [TASKS.erase]: task(runErasure),
  [TASKS.purgeExpired]: task(purgeExpired),
  [TASKS.backup]: task(runBackup),
  [TASKS.refreshWeekReport]: task(refreshWeekReports),
  [TASKS.trainChurnModel]: task(trainChurnTask),
}

// One JSON log line per job: at info when it completes, with what it returned (counts); at warn
// when it fails and will be retried, at error when that was its last attempt.
const logged =
  (app: App, task: string, run: Run) =>
  async (payload: unknown, helpers: JobHelpers): Promise<void> => {
    const { id, attempts, max_attempts: maxAttempts } = helpers.job
    const started = performance.now()
    const fields = (outcome: string) => ({
      task,
      job: id,
      attempt: attempts,
      outcome,
      ms: Math.round(performance.now() - started),
    })
    try {
      const counts = await run(app, payload, helpers)
      app.log('info', 'job', {
        ...fields('completed'),
        ...(counts !== null && typeof counts === 'object' ? { counts } : {}),
      })
    } catch (err) {
      const last = attempts >= maxAttempts
      app.log(last ? 'error' : 'warn', 'job', {
        ...fields(last ? 'failed' : 'retrying'),
        error: String((err as Error)?.message ?? err),
      })
      throw err
    }
  }

export const taskList = (app: App): TaskList =>
  Object.fromEntries(Object.entries(runs).map(([name, run]) => [name, logged(app, name, run)]))

// graphile-worker crontab lines (https://worker.graphile.org/docs/cron); one per recurring task.
export const crontab = (config: Config): string[] => [
  // Daily at 00:00 UTC: the kept "This week" reports for the new day (fans out one job per account).
  `0 0 * * * ${TASKS.refreshWeekReport}`,
  // Daily at 01:00 UTC: tracked events -> today's metric snapshots (fans out one job per account).
  `0 1 * * * ${TASKS.countEvents}`,
  // Daily at 01:30 UTC: time-dependent scores and automatic churn (fans out one job per account).
  `30 1 * * * ${TASKS.scoreDaily}`,
  // Daily at 02:30 UTC: tracked events and webhook payloads past their retention (privacy/retention.ts).
  `30 2 * * * ${TASKS.purgeExpired}`,
  // SERVICE_CHURN_MODEL_RETRAIN: the churn models trained again (fans out one job per account).
  ...(config.churnModelRetrain ? [`${config.churnModelRetrain} ${TASKS.trainChurnModel}`] : []),
  // SERVICE_BACKUP_SCHEDULE: a backup, tried once (runBackup records a failure for /metrics).
  ...(config.backupSchedule
    ? [`${config.backupSchedule} ${TASKS.backup} ?max=1&queue=${BACKUP_QUEUE} {"origin":"schedule"}`]
    : []),
]
