import type { JobHelpers, TaskList } from 'graphile-worker'
import { purgeAudit } from '../audit/retention.ts'
import { runBackup } from '../backups/task.ts'
import type { Config } from '../config.ts'
import type { App } from '../context.ts'
import { trainChurnTask } from '../churn/train.ts'
import { analyzeTables } from '../db/analyze.ts'
import { BACKUP_QUEUE, TASKS, type TaskName } from '../db/jobs.ts'
import { lastAttempt } from '../db/queue.ts'
import { refreshWeekReports } from '../insights/kept.ts'
import { observeJob, reportQueues } from '../metrics.ts'
import { scoreRecordsTask, scoreUploadsTask } from '../scoring/batch.ts'
import { probabilitiesWriter } from '../scoring/changes.ts'
import { scoreDailyRun } from '../scoring/daily.ts'
import { runErasure } from '../privacy/erasures.ts'
import { purgeExpired } from '../privacy/retention.ts'
import { recomputeSegments } from '../segments/members.ts'
import { applyEventsOfAccount } from '../tracking/apply.ts'
import { applyRelayOfAccount } from '../tracking/relay/apply.ts'
import { countEvents } from '../tracking/tracker/counts.ts'
import { processReceivedUpload } from '../uploads/process.ts'
import { deliverWebhook } from '../webhooks/deliver.ts'

// The task list: each task name and the module function it runs, typed by its payload
// (GraphileWorker.Tasks, declared in db/jobs.ts beside the spec builders, the only
// writers of jobs).
type Runs = {
  [K in TaskName]: (
    app: App,
    payload: GraphileWorker.Tasks[K],
    helpers: JobHelpers,
  ) => Promise<unknown>
}
const runs: Runs = {
  [TASKS.processUpload]: processReceivedUpload,
  [TASKS.applyEvents]: applyEventsOfAccount,
  [TASKS.applyRelay]: applyRelayOfAccount,
  [TASKS.countEvents]: countEvents,
  [TASKS.scoreRecords]: scoreRecordsTask,
  [TASKS.scoreUploads]: scoreUploadsTask,
  [TASKS.scoreDaily]: scoreDailyRun,
  [TASKS.deliverWebhook]: deliverWebhook,
  [TASKS.analyzeTables]: (app, payload) => analyzeTables(app.sql, payload),
  [TASKS.recomputeSegments]: recomputeSegments,
  [TASKS.erase]: runErasure,
  [TASKS.purgeExpired]: purgeExpired,
  [TASKS.purgeAudit]: purgeAudit,
  [TASKS.backup]: runBackup,
  [TASKS.refreshWeekReport]: refreshWeekReports,
  [TASKS.trainChurnModel]: (app, payload) => trainChurnTask(app, payload, probabilitiesWriter),
}

// The one wrapper of every task: one JSON log line per job, at info when it completes, with what it
// returned (counts); at warn when it fails and will be retried, at error when that was its last
// attempt. The same outcome and time are counted for /metrics.
const reported =
  <K extends TaskName>(app: App, task: K, run: Runs[K]) =>
  async (payload: GraphileWorker.Tasks[K], helpers: JobHelpers): Promise<void> => {
    const { id, attempts } = helpers.job
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
      observeJob(task, 'completed', (performance.now() - started) / 1000)
      app.log('info', 'job', {
        ...fields('completed'),
        ...(counts !== null && typeof counts === 'object' ? { counts } : {}),
      })
    } catch (err) {
      observeJob(task, 'failed', (performance.now() - started) / 1000)
      const last = lastAttempt(helpers.job)
      app.log(last ? 'error' : 'warn', 'job', {
        ...fields(last ? 'failed' : 'retrying'),
        error: String((err as Error)?.message ?? err),
      })
      throw err
    }
  }

// A worker process also reports the queue depth of each of its tasks from the start.
export const taskList = (app: App): TaskList => {
  const names = Object.values(TASKS)
  reportQueues(names)
  return Object.fromEntries(names.map((name) => [name, reported(app, name, runs[name])]))
}

// graphile-worker crontab lines (https://worker.graphile.org/docs/cron); one per recurring task.
export const crontab = (config: Config): string[] => [
  // Daily at 00:00 UTC: the kept "This week" reports for the new day (fans out one
  // job per account).
  `0 0 * * * ${TASKS.refreshWeekReport}`,
  // Daily at 01:00 UTC: tracked events -> today's metric snapshots (fans out one job per account).
  `0 1 * * * ${TASKS.countEvents}`,
  // Daily at 01:30 UTC: time-dependent scores and automatic churn (fans out one job per account).
  `30 1 * * * ${TASKS.scoreDaily}`,
  // Daily at 02:30 UTC: tracked events and webhook payloads past their retention
  // (privacy/retention.ts).
  `30 2 * * * ${TASKS.purgeExpired}`,
  // Daily at 02:45 UTC: audit log entries past SERVICE_AUDIT_RETENTION_DAYS (audit/retention.ts).
  `45 2 * * * ${TASKS.purgeAudit}`,
  // SERVICE_CHURN_MODEL_RETRAIN: the churn models trained again (fans out one job per account).
  ...(config.churnModelRetrain ? [`${config.churnModelRetrain} ${TASKS.trainChurnModel}`] : []),
  // SERVICE_BACKUP_SCHEDULE: a backup, tried once (runBackup records a failure for /metrics).
  ...(config.backupSchedule
    ? [
        `${config.backupSchedule} ${TASKS.backup} ?max=1&queue=${BACKUP_QUEUE} {"origin":"schedule"}`,
      ]
    : []),
]
