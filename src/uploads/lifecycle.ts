import type { Sql, Tx } from '../db/client.ts'

// The one home of an upload's lifecycle: received -> processing -> processed, or failed (by its
// job, or an operator's cancel; a retry makes a failed or stuck upload received again).
// sql/001_init.sql's check constraint on uploads.status allows these states.
export const UPLOAD_STATES = ['received', 'processing', 'processed', 'failed'] as const
export type UploadState = (typeof UPLOAD_STATES)[number]

// Pending: not yet processed nor failed. It counts against the account's backlog
// (SERVICE_MAX_PENDING_UPLOADS) and, past SERVICE_STUCK_UPLOAD_SECONDS, is stuck.
export const PENDING_STATES = ['received', 'processing'] as const satisfies UploadState[]
export const isPending = (status: UploadState) =>
  (PENDING_STATES as readonly UploadState[]).includes(status)

// The same predicates in SQL, on the uploads row of `table` (its alias in the statement). The
// states are literals, not parameters, so that the planner can use the partial index
// uploads_pending (sql/001_init.sql), whose predicate is this one.
const pendingList = `(${PENDING_STATES.map((s) => `'${s}'`).join(', ')})`
export const pendingSql = (sql: Sql | Tx, table = 'u') =>
  sql`${sql(table)}.status in ${sql.unsafe(pendingList)}`

export const stuckSql = (sql: Sql | Tx, stuckSeconds: number, table = 'u') =>
  sql`(${pendingSql(sql, table)} and
    ${sql(table)}.received_at < now() - make_interval(secs => ${stuckSeconds}))`
