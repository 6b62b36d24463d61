import type { PendingQuery, Row } from 'postgres'
import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { PURGE_BATCH, type Purged, purgeInBatches, purgeOlder } from '../db/purge.ts'

// Retention (docs/security.md, "Privacy"), run daily by graphile-worker's crontab (jobs/tasks.ts):
// tracked events are deleted SERVICE_EVENT_RETENTION_DAYS after the service received them, and
// webhook deliveries lose their payload, and their attempts the receiver's answer excerpt,
// SERVICE_DELIVERY_RETENTION_DAYS after they were created (the rows, statuses and timing stay; a
// delivery still pending keeps its payload until it is sent or fails). Each account is walked in
// batches (db/purge.ts): events through their primary key, deliveries through the index of those
// that still hold a payload. What was purged in all, and the oldest row kept, are stored
// for /metrics.
const EVENTS = { table: 'tracking_events', at: 'received_at' }

// The statement's parts (common table expressions) that blank the payloads of the account's
// deliveries `where` names (`d`, joined to `from` when given) and their attempts' answer excerpts;
// `blanked` yields their ids. A delivery still pending is not sent without its payload: it fails
// (retention leaves those alone; an erasure blanks them too).
export const blankDeliveries = (
  sql: Sql | Tx,
  accountId: number,
  where: PendingQuery<Row[]>,
  from: PendingQuery<Row[]> = sql`(select) none`,
) => sql`
  blanked as (
    update webhook_deliveries d set payload = null,
      status = case when d.status = 'pending' then 'failed' else d.status end
    from ${from}
    where d.account_id = ${accountId} and d.payload is not null and ${where}
    returning d.id
  ), excerpts as (
    update webhook_attempts a set response_excerpt = null from blanked b
    where a.account_id = ${accountId} and a.delivery_id = b.id and a.response_excerpt is not null
  )`

const purgeDeliveryBatch = (sql: Sql, accountId: number, cutoff: Date) => sql<Purged[]>`
  with batch as (
    select id, created_at, status from webhook_deliveries
    where account_id = ${accountId} and payload is not null order by id limit ${PURGE_BATCH}
  ), ${blankDeliveries(
    sql,
    accountId,
    sql`d.id = b.id and b.created_at < ${cutoff} and b.status <> 'pending'`,
    sql`batch b`,
  )}
  select (select count(*) from blanked)::int as n,
    (select count(*) = ${PURGE_BATCH} and bool_and(created_at < ${cutoff} and status <> 'pending')
      from batch) as more`

// The oldest row each kind keeps in an account (one probe of an index). An account at a time: Citus
// cannot push down a probe of a distributed table correlated to each row of the accounts table.
const oldestKept = {
  events: (sql: Sql, accountId: number) => sql<{ at: Date }[]>`
    select received_at as at from tracking_events where account_id = ${accountId} order by id
      limit 1`,
  deliveries: (sql: Sql, accountId: number) => sql<{ at: Date }[]>`
    select created_at as at from webhook_deliveries
    where account_id = ${accountId} and payload is not null order by id limit 1`,
}

const record = async (
  sql: Sql,
  kind: 'events' | 'deliveries',
  purged: number,
  accounts: number[],
) => {
  let at: Date | null = null
  for (const accountId of accounts) {
    const [row] = await oldestKept[kind](sql, accountId)
    if (row && (at === null || row.at < at)) at = row.at
  }
  await sql`
    insert into retention_runs (kind, purged, oldest_kept, ran_at)
      values (${kind}, ${purged}, ${at}, now())
    on conflict (kind) do update set purged = retention_runs.purged + excluded.purged,
      oldest_kept = excluded.oldest_kept, ran_at = excluded.ran_at`
}

const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000)

// The daily run over every account (the one task here not scoped by a request's account: it is the
// operator's setting and walks each account in turn).
export const purgeExpired = async (app: App) => {
  const accounts = (await app.sql<{ id: number }[]>`select id from accounts order by id`).map(
    (a) => a.id,
  )
  const eventsCutoff = daysAgo(app.config.eventRetentionDays)
  const deliveriesCutoff = daysAgo(app.config.deliveryRetentionDays)
  let events = 0
  let deliveries = 0
  for (const accountId of accounts) {
    events += await purgeOlder(app.sql, EVENTS, accountId, eventsCutoff)
    deliveries += await purgeInBatches(() =>
      purgeDeliveryBatch(app.sql, accountId, deliveriesCutoff),
    )
  }
  await record(app.sql, 'events', events, accounts)
  await record(app.sql, 'deliveries', deliveries, accounts)
  return { events, deliveries }
}
