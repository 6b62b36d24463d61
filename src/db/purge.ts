import type { PendingQuery } from 'postgres'
import type { Sql } from './client.ts'

// The retention runs (audit/retention.ts, privacy/retention.ts) walk each account's rows in id
// order, the order they are written in, through the primary key, one batch a statement, and stop at
// the first batch holding a row young enough to keep: no index on time is kept on the writes' path
// for it. PURGE_BATCH rows a batch.
export const PURGE_BATCH = 5000

// What one batch did: `n` rows purged; `more`, the whole batch was old, so the next may be too.
export type Purged = { n: number; more: boolean }

// Runs `batch` until a batch says no more may follow; the rows purged in all.
export const purgeInBatches = async (batch: () => PendingQuery<Purged[]>) => {
  let purged = 0
  for (;;) {
    const [{ n, more }] = await batch()
    purged += n
    if (!more) return purged
  }
}

// Rows of `table` (keyed by account_id and id) whose column `at` is before the cutoff are deleted.
type Aged = { table: string; at: string }

const deleteBatch = (sql: Sql, { table, at }: Aged, accountId: number, cutoff: Date) => sql<
  Purged[]
>`
  with batch as (
    select id, ${sql(at)} as at from ${sql(table)}
    where account_id = ${accountId} order by id limit ${PURGE_BATCH}
  ), gone as (
    delete from ${sql(table)} e using batch b
    where e.account_id = ${accountId} and e.id = b.id and b.at < ${cutoff}
    returning 1
  )
  select (select count(*) from gone)::int as n,
    (select count(*) = ${PURGE_BATCH} and bool_and(at < ${cutoff}) from batch) as more`

// The account's rows of `rows` older than the cutoff are deleted; how many.
export const purgeOlder = (sql: Sql, rows: Aged, accountId: number, cutoff: Date) =>
  purgeInBatches(() => deleteBatch(sql, rows, accountId, cutoff))
