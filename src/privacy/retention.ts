import type { PendingQuery, Row } from 'postgres'
import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'

// Retention (docs/security.md, "Privacy"), run daily by graphile-worker's crontab (jobs/tasks.ts):
// tracked events are deleted SERVICE_EVENT_RETENTION_DAYS after the service received them, and
// webhook deliveries lose their payload, and their attempts the receiver's answer excerpt,
// SERVICE_DELIVERY_RETENTION_DAYS after they were created (the rows, statuses and timing stay; a
// delivery still pending keeps its payload until it is sent or fails). Each account is walked in id
// order, the order rows are written in, through its primary key (events) or the index of deliveries
// that still hold a payload, one batch of BATCH rows per transaction, and the walk stops at the
// first batch holding a row young enough to keep: no index on time is kept for it on the intake's
// path. What was purged in all, and the oldest row kept, are stored for /metrics.

export const RETENTION_BATCH = 5000

// One batch of the account's oldest events: those past the cutoff go. `more`: the whole batch was
// old, so the next may be too.
const purgeEventBatch = (sql: Sql, accountId: number, cutoff: Date) => sql`
  with batch as (
    select id, received_at from tracking_events where account_id = ${accountId} order by id limit ${RETENTION_BATCH}
  ), gone as (
    delete from tracking_events e using batch b
    where e.account_id = ${accountId} and e.id = b.id and b.received_at < ${cutoff}
    returning 1
  )
  select (select count(*) from gone)::int as n,
    (select count(*) = ${RETENTION_BATCH} and bool_and(received_at < ${cutoff}) from batch) as more`

// The statement's parts (common table expressions) that blank the payloads of the account's deliveries
// `where` names (`d`, joined to `from` when given) and their attempts' answer excerpts; `blanked` yields
// their ids. A delivery still pending is not sent without its payload: it fails (retention leaves
// those alone; an erasure blanks them too).
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

const purgeDeliveryBatch = (sql: Sql, accountId: number, cutoff: Date) => sql`
  with batch as (
    select id, created_at, status from webhook_deliveries
    where account_id = ${accountId} and payload is not null order by id limit ${RETENTION_BATCH}
  ), ${blankDeliveries(
    sql,
    accountId,
    sql`d.id = b.id and b.created_at < ${cutoff} and b.status <> 'pending'`,
    sql`batch b`,
  )}
  select (select count(*) from blanked)::int as n,
    (select count(*) = ${RETENTION_BATCH} and bool_and(created_at < ${cutoff} and status <> 'pending') from batch)
      as more`

type Batch = (sql: Sql, accountId: number, cutoff: Date) => ReturnType<typeof purgeEventBatch>

const purgeAccount = async (sql: Sql, batch: Batch, accountId: number, cutoff: Date) => {
  let purged = 0
  for (;;) {
    const [{ n, more }] = await batch(sql, accountId, cutoff)
    purged += n
    if (!more) return purged
  }
}

// The oldest row each kind keeps in an account (one probe of an index). An account at a time: Citus
// cannot push down a probe of a distributed table correlated to each row of the accounts table.
const oldestKept = {
  events: (sql: Sql, accountId: number) => sql`
    select received_at as at from tracking_events where account_id = ${accountId} order by id limit 1`,
  deliveries: (sql: Sql, accountId: number) => sql`
    select created_at as at from webhook_deliveries where account_id = ${accountId} and payload is not null
    order by id limit 1`,
}

const record = async (sql: Sql, kind: 'events' | 'deliveries', purged: number, accounts: number[]) => {
  let at: Date | null = null
  for (const accountId of accounts) {
    const [row] = await oldestKept[kind](sql, accountId)
    if (row && (at === null || row.at < at)) at = row.at as Date
  }
  await sql`
    insert into retention_runs (kind, purged, oldest_kept, ran_at) values (${kind}, ${purged}, ${at}, now())
    on conflict (kind) do update set purged = retention_runs.purged + excluded.purged,
      oldest_kept = excluded.oldest_kept, ran_at = excluded.ran_at`
}

const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000)

// The daily run over every account (the one task here not scoped by a request's account: it is the
// operator's setting and walks each account in turn).
export const purgeExpired = async (app: App) => {
  const accounts = (await app.sql<{ id: number }[]>`select id from accounts order by id`).map((a) => a.id)
  const eventsCutoff = daysAgo(app.config.eventRetentionDays)
  const deliveriesCutoff = daysAgo(app.config.deliveryRetentionDays)
  let events = 0
  let deliveries = 0
  for (const accountId of accounts) {
    events += await purgeAccount(app.sql, purgeEventBatch, accountId, eventsCutoff)
    deliveries += await purgeAccount(app.sql, purgeDeliveryBatch, accountId, deliveriesCutoff)
  }
  await record(app.sql, 'events', events, accounts)
  await record(app.sql, 'deliveries', deliveries, accounts)
  return { events, deliveries }
}
