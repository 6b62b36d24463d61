import type { JobHelpers } from 'graphile-worker'
import type { App } from '../context.ts'
import { analyzeJobs } from '../db/analyze.ts'
import type { Sql, Tx } from '../db/client.ts'
import { PLANNER, setLocal } from '../db/planner.ts'
import {
  addCustomersChanged,
  addJobs,
  nextUploadOfQueue,
  type ProcessUploadPayload,
  scoreUploadsJob,
} from '../db/jobs.ts'
import { type PgError, unsharded } from '../db/shard-errors.ts'
import { isPermanent } from '../db/sqlstate.ts'
import { lastAttempt } from '../db/queue.ts'
import { entityOf, TABLES, type Collection } from '../db/tables.ts'
import { notifyUsers } from '../notifications/notifications.ts'
import { cutText, storableText } from '../validate.ts'
import { enqueueEvent } from '../webhooks/outbox.ts'
import { isPending, pendingSql, type UploadState } from './lifecycle.ts'
import { ALONE, type MergeResult, mergeRecords, type Turn } from './merge.ts'

// Locks the upload; a retried job finds it processed and does nothing.
const claim = (tx: Tx, accountId: number, uploadId: number) => tx`
  select kind, source, status, item_count from uploads
  where account_id = ${accountId} and id = ${uploadId} for update`

// The records it wrote are kept until they are scored (scoring/batch.ts scoreUploads).
const markProcessed = (tx: Tx, accountId: number, uploadId: number, r: MergeResult) => tx`
  update uploads set status = 'processed', processed_at = now(), items = null,
    created = ${r.created}, updated = ${r.updated}, ignored = ${r.ignored},
    warnings = ${tx.json(r.warnings)}, record_ids = ${r.ids}::bigint[]
  where account_id = ${accountId} and id = ${uploadId}`

// Whether more uploads of this kind wait to be merged after this one (by the uploads_pending index).
const morePending = async (tx: Tx, accountId: number, uploadId: number, kind: Collection) =>
  (
    await tx`select exists (select from uploads u where u.account_id = ${accountId}
      and ${pendingSql(tx)} and u.kind = ${kind} and u.id <> ${uploadId}) as more`
  )[0].more as boolean

// The scoring of the account's processed uploads of this kind is brought forward to now: the
// upload it may have been deferred for failed (db/jobs.ts scoreUploadsJob).
export const scoreProcessedNow = (sql: Sql | Tx, accountId: number, kind: Collection) =>
  addJobs(sql, [scoreUploadsJob(accountId, entityOf(kind), [])])

// A merge's turn (merge.ts), and one more wait before it enqueues what it sets off: until the
// upload merged before it, beside it, has committed.
type Pairing = Turn & { finishing: () => Promise<void> }
const FIRST: Pairing = { ...ALONE, finishing: async () => {} }

// The whole upload is merged in one transaction, together with everything it sets off (webhook
// deliveries, scoring, notifications): a crash at any point leaves either nothing or all of it.
// `notify` false: the caller tells the users once for many uploads (a CSV import's chunks).
export const processUpload = async (
  tx: Tx,
  accountId: number,
  uploadId: number,
  notify = true,
  turn = FIRST,
) => {
  await setLocal(tx, PLANNER.bulk)
  const [upload] = await claim(tx, accountId, uploadId)
  if (!upload || !isPending(upload.status)) return null
  const collection = upload.kind as Collection
  const result = await mergeRecords(tx, accountId, uploadId, collection, turn)
  await turn.finishing()
  await enqueueEvent(tx, accountId, result.event, result.newRecords, { source: upload.source })
  const tables = TABLES[entityOf(collection)]
  const deferred = await morePending(tx, accountId, uploadId, collection)
  await addJobs(
    tx,
    [scoreUploadsJob(accountId, entityOf(collection), [uploadId], deferred)],
    deferred,
  )
  await addJobs(tx, await analyzeJobs(tx, [tables.records, tables.snapshots]))
  if (upload.kind === 'customers') await addCustomersChanged(tx, accountId)
  // Every user of the account hears what was imported, with counts and when.
  if (notify) {
    await notifyUsers(tx, accountId, 'import.processed', {
      upload_id: uploadId,
      records: upload.kind,
      created: result.created,
      updated: result.updated,
      ignored: result.ignored,
      warnings: result.warnings.length,
      processed_at: new Date().toISOString(),
    })
  }
  await markProcessed(tx, accountId, uploadId, result)
  return result
}

// `kind`: only an upload of this kind changes.
const setStatus = (
  app: App,
  p: ProcessUploadPayload,
  from: UploadState,
  to: UploadState,
  error: string | null = null,
  kind?: Collection,
) => app.sql<{ kind: Collection }[]>`
  update uploads set status = ${to}, error = ${error}
  where account_id = ${p.account_id} and id = ${p.upload_id} and status = ${from}
    ${kind ? app.sql`and kind = ${kind}` : app.sql``}
  returning kind`

// What an operator and the client need to know of a failure: the statement's error, and where
// PostgreSQL names them, the constraint, table and column, and the failing row.
const describe = (e: PgError) => {
  const where = [
    e.constraint_name && `constraint ${e.constraint_name}`,
    e.table_name && `table ${e.table_name}`,
    e.column_name && `column ${e.column_name}`,
  ].filter(Boolean)
  return [
    String(e.message ?? e),
    where.length ? ` (${where.join(', ')})` : '',
    e.detail ? `: ${e.detail}` : '',
  ].join('')
}

// The item's field each column of a record or snapshot table holds.
const FIELDS: Record<Collection, Record<string, string>> = {
  customers: {
    external_id: 'external_id',
    name: 'name',
    owner_user_id: 'owner_email',
    attributes: 'attributes',
  },
  contacts: {
    external_id: 'contact_external_id',
    name: 'contact_name',
    customer_id: 'customer_external_id',
    attributes: 'attributes',
  },
}
const fieldOf = (collection: Collection, table: string, column: string) =>
  table.endsWith('_snapshots')
    ? column === 'date'
      ? 'metrics/date'
      : 'metrics'
    : FIELDS[collection][column]

// The item and field at fault, where the error lets them be found: the columns are the error's
// column or its constraint's; the item is the one that won (fold.ts) for the record whose external
// id is a value of the failing record row PostgreSQL quotes in the detail, when no other record's
// is. Null where neither can be told.
const locate = async (app: App, p: ProcessUploadPayload, e: PgError) => {
  const row = /^Failing row contains \((.*)\)\.?$/s.exec(e.detail ?? '')?.[1]
  if (!e.table_name || (!e.column_name && !e.constraint_name)) return null
  const [upload] = await app.sql`
    select u.kind, array(
      select a.attname::text from pg_constraint c
        join pg_attribute a on a.attrelid = c.conrelid and a.attnum = any(c.conkey)
      where c.conname = ${e.constraint_name ?? ''} and c.conrelid = to_regclass(${e.table_name})
      order by a.attnum) as columns,
      (select case when count(*) = 1 then max(m.item) end
        from jsonb_to_recordset(u.items) as m(external_id text, item int)
        where u.kind = ${e.table_name}
          and position(', ' || m.external_id || ', ' in ', ' || ${row ?? ''}::text || ', ') > 0
      ) as item
    from uploads u where u.account_id = ${p.account_id} and u.id = ${p.upload_id}`
  if (!upload) return null
  const collection = upload.kind as Collection
  const fields = (e.column_name ? [e.column_name] : (upload.columns as string[]))
    .map((c) => fieldOf(collection, e.table_name as string, c))
    .filter(Boolean)
  const item = upload.item === null ? null : `/${collection}/${upload.item}`
  if (item && fields.length === 1) return `${item}/${fields[0]}`
  return (
    [item && `item ${item}`, fields.length && `field ${fields.join(', ')}`]
      .filter(Boolean)
      .join(', ') || null
  )
}

// The error text of a failed upload: where (the item and field, when they can be told), then what.
// An error of a worker node is read as one PostgreSQL gives it (db/shard-errors.ts).
const failure = async (app: App, p: ProcessUploadPayload, err: unknown, permanent: boolean) => {
  const e = await unsharded(app.sql, err as PgError).catch(() => err as PgError)
  const at = await locate(app, p, e).catch(() => null)
  const what = permanent ? 'Processing failed and cannot succeed on retry' : 'Processing failed'
  return cutText(storableText(`${what}${at ? ` at ${at}` : ''}: ${describe(e)}`), 2000)
}

// A promise settled from outside (Promise.withResolvers, which Node 20 lacks). Whoever awaits it
// sees a rejection; no one awaiting it is no unhandled rejection.
const deferred = <T>() => {
  let resolve!: (value: T) => void
  let reject!: (reason: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  promise.catch(() => {})
  return { promise, resolve, reject }
}

// The upload of this kind that the account queue would run next, marked processing as its own job
// would mark it, to be merged beside this one (mergeBeside); none when the queue's next job is
// anything else or another queue's job runs (db/queue.ts nextOfQueue).
const takeNext = async (app: App, p: ProcessUploadPayload, jobId: string, kind: Collection) => {
  const next = await nextUploadOfQueue(app.sql, p.account_id, jobId)
  if (!next) return undefined
  const [taken] = await setStatus(app, next, 'received', 'processing', null, kind)
  return taken ? next : undefined
}

// Thrown where the upload after shares a record with the one before: it is left to its own job.
const SHARED = new Error('The upload shares records with the upload merged before it.')

// Two uploads of an account merged at once (docs/benchmarks.md, "ingest"): each in its own
// transaction, the second only as far as the first allows. It waits for the external ids the first
// staged, and gives up if it shares one, before it locks a record; creates its records after the
// first has created its own; and enqueues and commits after the first has committed, so that no one
// sees its records without the first's, nor its webhooks first. Given up (shared records, the
// first failed or found nothing to merge, an error of its own), it is rolled back and marked
// received again, and its own job merges it, or fails it, as ever; merged, its own job finds it
// processed. The first never waits for the second, so the two cannot deadlock.
const mergeBeside = async (app: App, p: ProcessUploadPayload, q: ProcessUploadPayload) => {
  const staged = deferred<string[]>()
  const created = deferred<void>()
  const first = app.sql.begin((tx) =>
    processUpload(tx, p.account_id, p.upload_id, true, {
      ...FIRST,
      staged: async (ids) => staged.resolve(ids),
      created: () => created.resolve(),
    }),
  )
  const ended = () => {
    const gone = new Error('The upload merged before ended first.')
    staged.reject(gone)
    created.reject(gone)
  }
  first.then(ended, ended)
  const second = app.sql.begin((tx) =>
    processUpload(tx, q.account_id, q.upload_id, true, {
      staged: async (ids) => {
        const before = new Set(await staged.promise)
        if (ids.some((id) => before.has(id))) throw SHARED
      },
      creating: () => created.promise,
      created: () => {},
      finishing: () => first.then(() => {}),
    }),
  )
  const [lead, follow] = await Promise.allSettled([first, second])
  const merged = follow.status === 'fulfilled' && follow.value !== null
  if (!merged) await setStatus(app, q, 'processing', 'received')
  if (follow.status === 'rejected' && follow.reason !== SHARED)
    app.log('debug', 'upload left to its own job', {
      upload: q.upload_id,
      error: String(follow.reason?.message ?? follow.reason),
    })
  if (lead.status === 'rejected') throw lead.reason
  return { result: lead.value, beside: merged ? q.upload_id : undefined }
}

// The upload shows `processing` while a worker holds it. An error that cannot pass on retry (a
// data exception or a constraint the data breaks, src/db/sqlstate.ts) fails the upload at once,
// visibly, and completes the job, so the upload stops counting as pending and the account's next
// uploads proceed. Other errors (transient: a lost connection, a serialization failure, a deadlock,
// a lock timeout) are thrown, and graphile-worker retries them with its backoff; the upload fails
// after the last attempt.
export const processReceivedUpload = async (
  app: App,
  p: ProcessUploadPayload,
  helpers: JobHelpers,
) => {
  const [mine] = await setStatus(app, p, 'received', 'processing')
  const next = mine && (await takeNext(app, p, helpers.job.id, mine.kind))
  try {
    const { result, beside } = next
      ? await mergeBeside(app, p, next)
      : { result: await app.sql.begin((tx) => processUpload(tx, p.account_id, p.upload_id)) }
    return (
      result && {
        upload: p.upload_id,
        created: result.created,
        updated: result.updated,
        ignored: result.ignored,
        ...(beside ? { beside } : {}),
      }
    )
  } catch (err) {
    const permanent = isPermanent(err, helpers.job.attempts)
    if (permanent || lastAttempt(helpers.job)) {
      const error = await failure(app, p, err, permanent)
      const [failed] = await setStatus(app, p, 'processing', 'failed', error)
      if (failed) await scoreProcessedNow(app.sql, p.account_id, failed.kind)
      if (permanent) return { upload: p.upload_id, failed: error }
    }
    throw err
  }
}
