import type { Sql, Tx } from '../db/client.ts'
import { addJobs, processUploadJob, TASKS } from '../db/jobs.ts'
import { removeWaitingJobs } from '../db/queue.ts'
import { refuse } from '../errors.ts'
import { stuckSql, type UploadState } from './lifecycle.ts'
import { scoreProcessedNow } from './process.ts'

// The view of an account's uploads that its clients and operators share: one upload, or the newest
// first, those in one state or those stuck; and an operator's retry or cancel of one.
const columns = (sql: Sql) => sql`
  u.id as upload_id, u.kind, u.status, u.item_count as items, u.created, u.updated, u.ignored,
  u.dropped_keys, coalesce(u.dropped_key_names, '[]') as dropped_key_names, u.warnings, u.error,
  u.received_at, u.processed_at, u.scored_at`

export const getUpload = async (sql: Sql, accountId: number, uploadId: number) => {
  // One line of SQL from `from` on: test/connection-roles.test.ts finds this read by that text.
  const [upload] = await sql`select ${columns(sql)}
    from uploads u where u.account_id = ${accountId} and u.id = ${uploadId}`
  return upload ?? refuse(404, `Upload ${uploadId} does not exist.`)
}

export const listAccountUploads = (
  sql: Sql,
  accountId: number,
  filter: { status?: UploadState; stuck: boolean },
  stuckSeconds: number,
) => sql`
  select ${columns(sql)}, ${stuckSql(sql, stuckSeconds)} as stuck
  from uploads u
  where u.account_id = ${accountId} ${filter.status ? sql`and u.status = ${filter.status}` : sql``}
    ${filter.stuck ? sql`and ${stuckSql(sql, stuckSeconds)}` : sql``}
  order by u.id desc limit 500`

// The upload's jobs still waiting (a running one is left to find the upload failed or received).
const removeJobs = (tx: Tx, accountId: number, uploadId: number) =>
  removeWaitingJobs(tx, TASKS.processUpload, accountId, 'upload_id', uploadId)

const lock = async (tx: Tx, accountId: number, uploadId: number, stuckSeconds: number) => {
  const [u] = await tx`
    select u.status, u.items is not null as has_items, ${stuckSql(tx, stuckSeconds)} as stuck
    from uploads u where u.account_id = ${accountId} and u.id = ${uploadId} for update`
  return u ?? refuse(404, `Upload ${uploadId} does not exist.`)
}

// A failed or stuck upload is received again and gets a new processing job.
export const retryUpload = (sql: Sql, accountId: number, uploadId: number, stuckSeconds: number) =>
  sql.begin(async (tx) => {
    const u = await lock(tx, accountId, uploadId, stuckSeconds)
    if (!(u.status === 'failed' || u.stuck) || !u.has_items) {
      refuse(
        409,
        `Upload ${uploadId} is ${u.status}; only a failed or stuck upload can be retried.`,
      )
    }
    await removeJobs(tx, accountId, uploadId)
    await tx`update uploads set status = 'received', error = null where account_id = ${accountId}
      and id = ${uploadId}`
    await addJobs(tx, [processUploadJob(accountId, uploadId)])
    return { upload_id: uploadId, status: 'received' }
  })

// An upload not yet processed is failed by hand; its items stay, so it can be retried.
export const cancelUpload = (sql: Sql, accountId: number, uploadId: number, stuckSeconds: number) =>
  sql.begin(async (tx) => {
    const u = await lock(tx, accountId, uploadId, stuckSeconds)
    if (u.status === 'processed') refuse(409, `Upload ${uploadId} is already processed.`)
    await removeJobs(tx, accountId, uploadId)
    const [{ kind }] = await tx`
      update uploads set status = 'failed', error = 'Cancelled by an operator.'
      where account_id = ${accountId} and id = ${uploadId} returning kind`
    await scoreProcessedNow(tx, accountId, kind)
    return { upload_id: uploadId, status: 'failed' }
  })
