import * as v from 'valibot'
import { refuse } from '../errors.ts'
import { addJobs, deliverWebhookJob } from '../db/jobs.ts'
import type { Sql, Tx } from '../db/client.ts'
import { strict } from '../validate.ts'

const requireWebhook = async (sql: Sql, accountId: number, webhookId: number) => {
  const [hook] =
    await sql`select 1 from webhooks where account_id = ${accountId} and id = ${webhookId}`
  if (!hook) refuse(404, `Webhook ${webhookId} does not exist.`)
}

// Attempt times are formatted like every other timestamp of the API (JavaScript's ISO form),
// which json_build_object would not do.
export const listDeliveries = async (
  sql: Sql,
  accountId: number,
  webhookId: number,
  limit: number,
) => {
  await requireWebhook(sql, accountId, webhookId)
  return sql`
    select d.id, d.message_id, d.status, d.created_at, d.delivered_at,
      coalesce(json_agg(json_build_object(
        'attempt', a.attempt,
        'at', to_char(a.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'status_code', a.status_code, 'duration_ms', a.duration_ms, 'error', a.error,
        'response_excerpt', a.response_excerpt
      ) order by a.attempt) filter (where a.attempt is not null), '[]') as attempts
    from (
      select id, message_id, status, created_at, delivered_at, account_id from webhook_deliveries
      where account_id = ${accountId} and webhook_id = ${webhookId} order by id desc limit ${limit}
    ) d
    left join webhook_attempts a on a.account_id = d.account_id and a.delivery_id = d.id
    group by d.id, d.message_id, d.status, d.created_at, d.delivered_at
    order by d.id desc`
}

// Deliveries sent again (a redelivery, a recovery, a re-enabled webhook's held ones) share
// one queue per webhook, which graphile-worker runs one job at a time: each goes out after
// the one before it.
const resendQueue = (accountId: number, webhookId: number) => `webhook:${accountId}:${webhookId}`

// A delivery whose payload is gone (past its retention, or erased) has nothing left to send.
// The chosen deliveries go back to pending with a fresh round of attempts, numbered on from the
// ones already logged, and keep their frozen payload and message id (webhook-id), so a receiver
// that did get one can recognise the copy.
export const requeue = async (
  tx: Tx,
  accountId: number,
  webhookId: number,
  which: ReturnType<Tx>,
) => {
  const rows = await tx`
    update webhook_deliveries d set status = 'pending', delivered_at = null
    where d.account_id = ${accountId} and d.webhook_id = ${webhookId} and ${which}
      and d.payload is not null
    returning d.id, d.status, (select coalesce(max(attempt), 0) + 1 from webhook_attempts a
      where a.account_id = d.account_id and a.delivery_id = d.id)::int as first_attempt`
  const inOrder = [...rows].sort((x, y) => x.id - y.id)
  // graphile-worker takes a queue's jobs by run_at alone (not by id), so each is due a millisecond
  // after the one before it.
  const start = Date.now()
  await addJobs(
    tx,
    inOrder.map((d, i) => ({
      ...deliverWebhookJob(
        { account_id: accountId, delivery_id: d.id, first_attempt: d.first_attempt },
        new Date(start + i),
      ),
      queue: resendQueue(accountId, webhookId),
    })),
  )
  return inOrder
}

export const redeliver = (sql: Sql, accountId: number, webhookId: number, deliveryId: number) =>
  sql.begin(async (tx) => {
    const [d] = await requeue(tx, accountId, webhookId, tx`d.id = ${deliveryId}`)
    return d ?? refuse(404, `Delivery ${deliveryId} of webhook ${webhookId} does not exist.`)
  })

// Date.parse as well: valibot's ISO pattern also admits a form Date cannot read (an offset of whole
// hours, +01), which would otherwise reach the database as an invalid time.
export const RecoverBody = strict({
  since: v.pipe(
    v.string(),
    v.isoTimestamp('Must be an ISO 8601 time, e.g. 2026-01-31T09:00:00Z.'),
    v.check(
      (s) => !Number.isNaN(Date.parse(s)),
      'Must be an ISO 8601 time, e.g. 2026-01-31T09:00:00Z.',
    ),
  ),
})

// Every delivery of the webhook that failed for good and was created at `since` or later is sent
// again, in the order they were created (which keeps each customer's events in order too).
export const recover = async (sql: Sql, accountId: number, webhookId: number, since: string) => {
  await requireWebhook(sql, accountId, webhookId)
  const recovered = await sql.begin((tx) =>
    requeue(
      tx,
      accountId,
      webhookId,
      tx`d.status = 'failed' and d.created_at >= ${new Date(since)}`,
    ),
  )
  return { recovered: recovered.length }
}
