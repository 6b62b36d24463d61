import type { JobHelpers } from 'graphile-worker'
import type { App } from '../context.ts'
import { analyzeJobs } from '../db/analyze.ts'
import type { Sql, Tx } from '../db/client.ts'
import { PLANNER, setLocal } from '../db/planner.ts'
import {
  addCustomersChanged,
  addJobs,
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
import { type MergeResult, mergeRecords } from './merge.ts'

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

// The whole upload is merged in one transaction, together with everything it sets off (webhook
// deliveries, scoring, notifications): a crash at any point leaves either nothing or all of it.
// `notify` false: the caller tells the users once for many uploads (a CSV import's chunks).
export const processUpload = async (tx: Tx, accountId: number, uploadId: number, notify = true) => {
  await setLocal(tx, PLANNER.bulk)
  const [upload] = await claim(tx, accountId, uploadId)
  if (!upload || !isPending(upload.status)) return null
  const collection = upload.kind as Collection
  const result = await mergeRecords(tx, accountId, uploadId, collection)
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

const setStatus = (
  app: App,
  p: ProcessUploadPayload,
  from: UploadState,
  to: UploadState,
  error: string | null = null,
) => app.sql<{ kind: Collection }[]>`
  update uploads set status = ${to}, error = ${error}
  where account_id = ${p.account_id} and id = ${p.upload_id} and status = ${from}
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
  await setStatus(app, p, 'received', 'processing')
  try {
    const result = await app.sql.begin((tx) => processUpload(tx, p.account_id, p.upload_id))
    return (
      result && {
        upload: p.upload_id,
        created: result.created,
        updated: result.updated,
        ignored: result.ignored,
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
