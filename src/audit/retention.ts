import type { App } from '../context.ts'
import type { Sql } from '../db/client.ts'

// The daily run (jobs/tasks.ts): entries older than SERVICE_AUDIT_RETENTION_DAYS go. Each account
// is walked in id order (the order entries are written in) through its primary key, one batch per
// statement, and stops at the first batch holding an entry young enough to keep, as the privacy
// retention walks events: no index on time is kept on the writes' path for it.

const AUDIT_BATCH = 5000

const purgeBatch = (sql: Sql, accountId: number, cutoff: Date) => sql`
  with batch as (
    select id, at from audit_entries where account_id = ${accountId} order by id limit ${AUDIT_BATCH}
  ), gone as (
    delete from audit_entries e using batch b
    where e.account_id = ${accountId} and e.id = b.id and b.at < ${cutoff}
    returning 1
  )
  select (select count(*) from gone)::int as n,
    (select count(*) = ${AUDIT_BATCH} and bool_and(at < ${cutoff}) from batch) as more`

// The operator's own entries are few (one a backup): one statement.
const purgeOperator = async (sql: Sql, cutoff: Date) =>
  (
    await sql`with gone as (delete from operator_audit_entries where at < ${cutoff} returning 1)
    select count(*)::int as n from gone`
  )[0].n as number

export const purgeAudit = async (app: App) => {
  const cutoff = new Date(Date.now() - app.config.auditRetentionDays * 86_400_000)
  const accounts = (await app.sql`select id from accounts order by id`).map((a) => a.id as number)
  let entries = 0
  for (const accountId of accounts) {
    for (;;) {
      const [{ n, more }] = await purgeBatch(app.sql, accountId, cutoff)
      entries += n
      if (!more) break
    }
  }
  return { entries, operator_entries: await purgeOperator(app.sql, cutoff) }
}
