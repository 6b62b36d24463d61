import type { App } from '../context.ts'
import type { Sql } from '../db/client.ts'
import { purgeOlder } from '../db/purge.ts'

// The daily run (jobs/tasks.ts): entries older than SERVICE_AUDIT_RETENTION_DAYS go, each account's
// in batches (db/purge.ts), as the privacy retention purges events.
const ENTRIES = { table: 'audit_entries', at: 'at' }

// The operator's own entries are few (one a backup): one statement.
const purgeOperator = async (sql: Sql, cutoff: Date) =>
  (
    await sql<{ n: number }[]>`
      with gone as (delete from operator_audit_entries where at < ${cutoff} returning 1)
      select count(*)::int as n from gone`
  )[0].n

export const purgeAudit = async (app: App) => {
  const cutoff = new Date(Date.now() - app.config.auditRetentionDays * 86_400_000)
  const accounts = await app.sql<{ id: number }[]>`select id from accounts order by id`
  let entries = 0
  for (const { id } of accounts) entries += await purgeOlder(app.sql, ENTRIES, id, cutoff)
  return { entries, operator_entries: await purgeOperator(app.sql, cutoff) }
}
