import type { Entity } from '../property.ts'
import type { Sql, Tx } from './client.ts'
import { nextOfQueue } from './queue.ts'

// Every background job the service enqueues, each spec built by one function here: its task name,
// payload, queue and key. src/jobs/tasks.ts maps the task names to the domain functions that run
// them.
export interface JobSpec {
  task: string
  // An array payload is a batch: a keyed job still waiting gains the items of each spec added
  // under its key (graphile-worker's add_jobs appends them).
  payload: Record<string, unknown> | Record<string, unknown>[]
  queue?: string
  runAt?: Date
  maxAttempts?: number
  jobKey?: string
}

// Jobs are always added with SQL on the caller's connection, so they commit or roll back with
// the data they concern. One statement for any number of jobs: add_jobs, far faster than
// add_job each. The specs travel as JSON text: a parameter PostgreSQL types json would be
// encoded once more. `keepRunAt`: a keyed job still waiting keeps its run_at (it gains the new
// payload all the same).
export const addJobs = (tx: Sql | Tx, specs: JobSpec[], keepRunAt = false) =>
  specs.length === 0
    ? Promise.resolve()
    : tx`
  select graphile_worker.add_jobs(array(
    select row(s->>'task', s->'payload', s->>'queue', (s->>'runAt')::timestamptz,
               (s->>'maxAttempts')::int, s->>'jobKey', null, null)::graphile_worker.job_spec
    from json_array_elements(${JSON.stringify(specs)}::text::json) s), ${keepRunAt})`.then(
        () => undefined,
      )

// An account's uploads, tracking and event counts run one at a time on its queue, in order; its
// scoring on a second queue beside them, so that an upload waits for the uploads before it but not
// for their scoring. Writers on both lock the records they change in service_id order first
// (src/db/locks.ts), so the two never deadlock.
const accountQueue = (accountId: number) => `account:${accountId}`
const scoringQueue = (accountId: number) => `scoring:${accountId}`

export const TASKS = {
  processUpload: 'process_upload',
  applyEvents: 'apply_events',
  // The relay (tracking/relay/, Segment's protocol) keeps the name it was stored under.
  applyRelay: 'apply_segment',
  // The identifier predates the name: it is stored in graphile-worker's tables and crontab.
  countEvents: 'aggregate_events',
  scoreRecords: 'score_records',
  scoreUploads: 'score_uploads',
  scoreDaily: 'score_daily',
  deliverWebhook: 'deliver_webhook',
  analyzeTables: 'analyze_tables',
  recomputeSegments: 'recompute_segments',
  erase: 'erase',
  purgeExpired: 'purge_expired',
  purgeAudit: 'purge_audit',
  backup: 'backup_database',
  refreshWeekReport: 'refresh_week_report',
  trainChurnModel: 'train_churn_model',
} as const

export interface ProcessUploadPayload {
  account_id: number
  upload_id: number
}
export interface ScoreRecordsPayload {
  account_id: number
  entity: Entity
  ids?: number[]
  // Only in jobs queued before sql/054, which score an upload's records by a job of their own.
  upload_id?: number
  // false: the records' engagement histories are kept as stored (scoring/batch.ts ScoreOptions).
  snapshots?: false
}
export interface AccountPayload {
  account_id: number
}
// The daily cron runs have no account: they fan out one job per account.
export interface CronPayload {
  account_id?: number
}
export interface ErasePayload {
  account_id: number
  erasure_id: number
}
export interface BackupPayload {
  origin: 'schedule' | 'api'
}
export interface AnalyzeTablesPayload {
  tables: string[]
}
export interface DeliverWebhookPayload {
  account_id: number
  delivery_id: number
  // The attempt number this round of (up to ATTEMPTS_PER_ROUND) attempts started at: 1, or the next
  // number after the attempts already logged when the delivery was redelivered.
  first_attempt?: number
  // The endpoint's rate limit already gave this job its slot (webhooks/deliver.ts).
  slotted?: boolean
}

// Each task's payload, as graphile-worker's types know it (declaration merging): the task list
// (jobs/tasks.ts) is checked against it, so a task's function takes what its spec above writes.
declare global {
  namespace GraphileWorker {
    interface Tasks {
      [TASKS.processUpload]: ProcessUploadPayload
      [TASKS.applyEvents]: AccountPayload
      [TASKS.applyRelay]: AccountPayload
      [TASKS.countEvents]: CronPayload
      [TASKS.scoreRecords]: ScoreRecordsPayload
      [TASKS.scoreUploads]: ScoreUploadsPayload
      [TASKS.scoreDaily]: CronPayload
      [TASKS.deliverWebhook]: DeliverWebhookPayload
      [TASKS.analyzeTables]: AnalyzeTablesPayload
      [TASKS.recomputeSegments]: AccountPayload
      [TASKS.erase]: ErasePayload
      // A cron run: its payload holds only graphile-worker's _cron metadata.
      [TASKS.purgeExpired]: Record<string, unknown>
      [TASKS.purgeAudit]: Record<string, unknown>
      [TASKS.trainChurnModel]: CronPayload
      [TASKS.backup]: BackupPayload
      [TASKS.refreshWeekReport]: CronPayload
    }
  }
}
export type TaskName = keyof GraphileWorker.Tasks

// The upload's processing job is added by the statement that stores the upload
// (uploads/receive.ts), so its spec is SQL: the upload's id is only known there.
export const processUploadJobSql = (
  sql: Sql | Tx,
  accountId: number,
  uploadId: ReturnType<Sql>,
) => sql`
  graphile_worker.add_job(${TASKS.processUpload}::text,
    json_build_object('account_id', ${accountId}::bigint, 'upload_id', ${uploadId}),
    queue_name => ${accountQueue(accountId)}::text)`

// The upload whose processing its account's queue runs after the running job `jobId`, if that is
// the queue's next job (db/queue.ts nextOfQueue).
export const nextUploadOfQueue = async (sql: Sql | Tx, accountId: number, jobId: string) => {
  const [next] = await nextOfQueue(sql, accountQueue(accountId), jobId)
  return next?.task === TASKS.processUpload ? (next.payload as ProcessUploadPayload) : undefined
}

// The same spec as a job, to process an upload again (an operator's retry).
export const processUploadJob = (accountId: number, uploadId: number): JobSpec => ({
  task: TASKS.processUpload,
  payload: { account_id: accountId, upload_id: uploadId },
  queue: accountQueue(accountId),
})

// At most one apply job per account waits to run, for tracked events and for Segment messages each:
// the intake adds one only when none is waiting (tracking/tracker/intake.ts,
// tracking/relay/intake.ts), and a job that leaves rows behind queues its successor.
export type ApplyTask = typeof TASKS.applyEvents | typeof TASKS.applyRelay
export const applyJobKey = (task: ApplyTask, accountId: number) => `${task}:${accountId}`
export const applyJob = (task: ApplyTask, accountId: number): JobSpec => ({
  task,
  payload: { account_id: accountId },
  queue: accountQueue(accountId),
  jobKey: applyJobKey(task, accountId),
})
// The same spec as SQL, for the intake statements.
export const applyJobSql = (sql: Sql | Tx, task: ApplyTask, accountId: number) => sql`
  graphile_worker.add_job(${task}::text, json_build_object('account_id', ${accountId}::bigint),
    queue_name => ${accountQueue(accountId)}::text,
      job_key => ${applyJobKey(task, accountId)}::text)`

// Scoring of the given records, on the account's scoring queue; none when there are none.
export const scoreRecordsJobs = (accountId: number, entity: Entity, ids: number[]): JobSpec[] =>
  ids.length
    ? [
        {
          task: TASKS.scoreRecords,
          payload: { account_id: accountId, entity, ids },
          queue: scoringQueue(accountId),
        },
      ]
    : []

// The scoring of processed uploads (scoring/batch.ts scoreUploads): one job per account and
// entity, a batch that each upload processed while it waits joins. An upload processed while
// more of its kind wait to be merged defers it: the job then runs once the last of them is merged
// (its spec, at once, replaces the run_at) or at SCORING_DEFERRAL_MS after the first deferral,
// whichever comes first, so that a long import's merges are not slowed by its scoring, and an
// upload's scores never wait longer than that. An empty batch only brings the run_at forward (an
// upload that failed, which was the one waited for).
interface ScoreUploadsItem {
  account_id: number
  entity: Entity
  upload_id: number
}
export type ScoreUploadsPayload = ScoreUploadsItem[]
export const SCORING_DEFERRAL_MS = 30_000
export const scoreUploadsJob = (
  accountId: number,
  entity: Entity,
  uploadIds: number[],
  deferred = false,
): JobSpec => ({
  task: TASKS.scoreUploads,
  payload: uploadIds.map((id) => ({ account_id: accountId, entity, upload_id: id })),
  queue: scoringQueue(accountId),
  jobKey: `${TASKS.scoreUploads}:${accountId}:${entity}`,
  runAt: deferred ? new Date(Date.now() + SCORING_DEFERRAL_MS) : undefined,
})

// The whole account is rescored after a model change. The job key folds changes made while the
// rescoring still waits into one run.
// `keepHistory`: the entities whose engagement rules did not change, so that every stored history
// still holds and only what derives from it and from the records is scored again. Such a job has a
// key of its own: it never replaces a full rescoring still waiting, which it then follows.
export const rescoreAccountJobs = (
  accountId: number,
  keepHistory: Entity[] = [],
): (JobSpec & { payload: ScoreRecordsPayload })[] =>
  (['customer', 'contact'] as const).map((entity) => {
    const keep = keepHistory.includes(entity)
    return {
      task: TASKS.scoreRecords,
      payload: keep
        ? { account_id: accountId, entity, snapshots: false }
        : { account_id: accountId, entity },
      queue: scoringQueue(accountId),
      jobKey: `${TASKS.scoreRecords}:${accountId}:${entity}${keep ? ':history' : ''}`,
    }
  })

// The daily runs of one account: event counts on the account's queue (after the events it has
// received are applied), scoring on its scoring queue. The job key keeps a second run from
// doubling the work.
export const countEventsJob = (accountId: number): JobSpec => ({
  task: TASKS.countEvents,
  payload: { account_id: accountId },
  queue: accountQueue(accountId),
  jobKey: `${TASKS.countEvents}:${accountId}`,
})
export const scoreDailyJob = (accountId: number): JobSpec => ({
  task: TASKS.scoreDaily,
  payload: { account_id: accountId },
  queue: scoringQueue(accountId),
  jobKey: `${TASKS.scoreDaily}:${accountId}`,
})

// An account's kept "This week" reports computed anew (insights/week.ts): the daily cron's fan-out,
// for the new day, and a refresh put off to keep its pace.
export const weekReportJobKey = (accountId: number) => `${TASKS.refreshWeekReport}:${accountId}`
export const weekReportJob = (accountId: number, runAt?: Date): JobSpec => ({
  task: TASKS.refreshWeekReport,
  payload: { account_id: accountId },
  runAt,
  jobKey: weekReportJobKey(accountId),
})
// The same refresh after a write of the rows the report reads (customers, customer_scores), added
// by every statement's transaction that writes them (docs/design.md, "This week"): 1 s ahead, and a
// write while it waits leaves its run_at as it is (preserve_run_at), so a steady stream of writes
// delays the refresh by 1 s at most, never indefinitely.
const weekReportRefreshSql = (tx: Sql | Tx, accountId: number) => tx`
  graphile_worker.add_job(${TASKS.refreshWeekReport}::text,
    json_build_object('account_id', ${accountId}::bigint),
    run_at => clock_timestamp() + interval '1 second',
    job_key => ${weekReportJobKey(accountId)}::text,
    job_key_mode => 'preserve_run_at')`
export const addWeekReportRefresh = (tx: Sql | Tx, accountId: number) =>
  tx`select ${weekReportRefreshSql(tx, accountId)}`.then(() => undefined)

// The webhook's own retries are new jobs scheduled by the task (5 s, 25 s), so graphile-worker's
// attempts only come into play when a worker dies mid-job (the stale lock is recovered and the
// job runs again) or the task throws on a database error; with maxAttempts 1 such a job could
// never run again. The key keeps at most one waiting job per delivery: a redelivery replaces a
// waiting retry instead of adding a second sender.
export const deliverWebhookJob = (payload: DeliverWebhookPayload, runAt?: Date): JobSpec => ({
  task: TASKS.deliverWebhook,
  payload: { ...payload },
  runAt,
  maxAttempts: 5,
  jobKey: `webhook_delivery:${payload.account_id}:${payload.delivery_id}`,
})

// The job key keeps one waiting at a time; the maintenance queue keeps it off the accounts' queues.
export const analyzeTablesJob = (tables: string[]): JobSpec => ({
  task: TASKS.analyzeTables,
  payload: { tables },
  queue: 'maintenance',
  jobKey: TASKS.analyzeTables,
})

// An account's segment membership is recomputed after every change of its customers' data
// (src/segments/members.ts): one job per account, keyed, on the scoring queue, so that it runs
// after the scoring the change set off. A change while the job waits leaves its run_at as it is
// (preserve_run_at): a steady stream of changes delays it by SEGMENTS_DELAY at most, instead of
// pushing it back forever. A change while it runs adds the next one (graphile-worker gives a
// running job's key to a new job), which sees the change.
const SEGMENTS_DELAY = '1 second'
const recomputeSegmentsSql = (tx: Sql | Tx, accountId: number) => tx`
  graphile_worker.add_job(${TASKS.recomputeSegments}::text,
    json_build_object('account_id', ${accountId}::bigint),
    queue_name => ${scoringQueue(accountId)}::text,
    run_at => now() + ${SEGMENTS_DELAY}::interval,
    job_key => ${`${TASKS.recomputeSegments}:${accountId}`}::text,
    job_key_mode => 'preserve_run_at')`
export const addRecomputeSegments = (tx: Sql | Tx, accountId: number) =>
  tx`select ${recomputeSegmentsSql(tx, accountId)}`.then(() => undefined)

// Customers rows changed (their data, churn or scores): what follows both, in one statement.
export const addCustomersChanged = (tx: Sql | Tx, accountId: number) =>
  tx`select ${recomputeSegmentsSql(tx, accountId)}, ${weekReportRefreshSql(tx, accountId)}`.then(
    () => undefined,
  )

// An erasure runs on the account's queue, after the uploads and tracked events received before it
// and before those after it, which then meet its suppressions. The payload names the request, never
// the people (they are in erasure_targets until the job erases them).
export const eraseJob = (accountId: number, erasureId: number): JobSpec => ({
  task: TASKS.erase,
  payload: { account_id: accountId, erasure_id: erasureId },
  queue: accountQueue(accountId),
  maxAttempts: 5,
})

// Backups run one at a time on their own queue, once each (a failure is counted, not retried: the
// next scheduled one is the retry); the key folds a second request made while one waits into it.
export const BACKUP_QUEUE = 'backup'
export const backupJob = (): JobSpec => ({
  task: TASKS.backup,
  payload: { origin: 'api' } satisfies BackupPayload,
  queue: BACKUP_QUEUE,
  maxAttempts: 1,
  jobKey: TASKS.backup,
})

// An account's churn model trains on a queue of its own (a training takes up to a minute, which
// the account's uploads and scoring do not wait for), once: a failed training is recorded as
// such (churn/train.ts), and the next request is the retry.
export const churnTrainJob = (accountId: number): JobSpec => ({
  task: TASKS.trainChurnModel,
  payload: { account_id: accountId } satisfies AccountPayload,
  queue: `churn:${accountId}`,
  maxAttempts: 1,
  jobKey: `${TASKS.trainChurnModel}:${accountId}`,
})
