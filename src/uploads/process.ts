import type { JobHelpers } from 'graphile-worker'
import type { App } from '../context.ts'
import { analyzeJobs } from '../db/analyze.ts'
import type { Tx } from '../db/client.ts'
import { addJobs, type ProcessUploadPayload, scoreRecordsJobs } from '../db/jobs.ts'
import { isPermanent } from '../db/sqlstate.ts'
import { entityOf, TABLES, type UploadKind } from '../db/tables.ts'
import { enqueueCustomerCreated } from '../webhooks/outbox.ts'
import { mergeContacts, mergeCustomers, type MergeResult } from './merge.ts'

// Locks the upload; a retried job finds it processed and does nothing.
const claim = (tx: Tx, accountId: number, uploadId: number) => tx`
  select kind, source, status, item_count from uploads
  where account_id = ${accountId} and id = ${uploadId} for update`

const markProcessed = (tx: Tx, accountId: number, uploadId: number, r: MergeResult) => tx`
  update uploads set status = 'processed', processed_at = now(), items = null,
    created = ${r.created}, updated = ${r.updated}, ignored = ${r.ignored},
    warnings = ${tx.json(r.warnings as never)}
  where account_id = ${accountId} and id = ${uploadId}`

// Every user of the account hears what was imported, with counts and when.
const notifyUsers = (tx: Tx, accountId: number, uploadId: number, kind: string, r: MergeResult) => tx`
  insert into notifications (account_id, user_id, kind, body)
  select ${accountId}, u.id, 'import.processed', ${tx.json({
    upload_id: uploadId,
    records: kind,
    created: r.created,
    updated: r.updated,
    ignored: r.ignored,
    warnings: r.warnings.length,
    processed_at: new Date().toISOString(),
  })}
  from users u where u.account_id = ${accountId}`

// The whole upload is merged in one transaction, together with everything it sets off (webhook
// deliveries, scoring, notifications): a crash at any point leaves either nothing or all of it.
// `notify` false: the caller tells the users once for many uploads (a CSV import's chunks).
export const processUpload = async (tx: Tx, accountId: number, uploadId: number, notify = true) => {
  const [upload] = await claim(tx, accountId, uploadId)
  if (!upload || upload.status === 'processed' || upload.status === 'failed') return null
  const result =
    upload.kind === 'customers'
      ? await mergeCustomers(tx, accountId, uploadId)
      : await mergeContacts(tx, accountId, uploadId)
  await enqueueCustomerCreated(tx, accountId, upload.source, result.newCustomers)
  const tables = TABLES[entityOf(upload.kind as UploadKind)]
  await addJobs(tx, [
    ...scoreRecordsJobs(accountId, entityOf(upload.kind as UploadKind), result.ids, uploadId),
    ...(await analyzeJobs(tx, [tables.records, tables.snapshots])),
  ])
  if (notify) await notifyUsers(tx, accountId, uploadId, upload.kind, result)
  await markProcessed(tx, accountId, uploadId, result)
  return result
}

const setStatus = (app: App, p: ProcessUploadPayload, from: string, to: string, error: string | null = null) => app.sql`
  update uploads set status = ${to}, error = ${error}
  where account_id = ${p.account_id} and id = ${p.upload_id} and status = ${from}`

// What an operator and the client need to know of a failure: the statement's error, and where
// PostgreSQL names them, the constraint, table and column, and the failing row.
const describe = (err: unknown) => {
  const e = err as {
    message?: string
    constraint_name?: string
    table_name?: string
    column_name?: string
    detail?: string
  }
  const where = [
    e.constraint_name && `constraint ${e.constraint_name}`,
    e.table_name && `table ${e.table_name}`,
    e.column_name && `column ${e.column_name}`,
  ].filter(Boolean)
  return [String(e.message ?? err), where.length ? ` (${where.join(', ')})` : '', e.detail ? `: ${e.detail}` : '']
    .join('')
    .slice(0, 2000)
}

// The upload shows `processing` while a worker holds it. An error that cannot pass on retry (a
// data exception or a constraint the data breaks) fails the upload at once, visibly, and completes
// the job, so the upload stops counting as pending and the account's next uploads proceed. Other
// errors are retried with graphile-worker's backoff; the upload fails after the last attempt.
export const processUploadJob = async (app: App, p: ProcessUploadPayload, helpers: JobHelpers) => {
  await setStatus(app, p, 'received', 'processing')
  try {
    const result = await app.sql.begin((tx) => processUpload(tx, p.account_id, p.upload_id))
    return result && { upload: p.upload_id, created: result.created, updated: result.updated, ignored: result.ignored }
  } catch (err) {
    const permanent = isPermanent(err)
    if (permanent || helpers.job.attempts >= helpers.job.max_attempts) {
      const error =
        `${permanent ? 'Processing failed and cannot succeed on retry' : 'Processing failed'}: ` + `${describe(err)}`
      await setStatus(app, p, 'processing', 'failed', error)
      if (permanent) return { upload: p.upload_id, failed: error }
    }
    throw err
  }
}
