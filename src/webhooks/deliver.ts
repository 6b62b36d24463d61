import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addJobs, type DeliverWebhookPayload, deliverWebhookJob } from '../db/jobs.ts'
import { recordHealth } from './health.ts'
import { ATTEMPTS_PER_ROUND, retryDelaySeconds, type SendResult, sendWebhook } from './send.ts'
import { hmacHeader, standardWebhookHeaders } from './sign.ts'

// A removed webhook takes its deliveries with it (on delete cascade), so a missing row means
// there is nothing left to send. The old secret signs too while its grace period after a rotation
// lasts. The share lock waits for a re-enabling transaction in flight, whose resend could otherwise
// miss a delivery committed meanwhile that this job then took for held.
const load = (sql: Sql, p: DeliverWebhookPayload) => sql`
  select d.status, d.webhook_id, d.message_id, d.payload, w.url, w.active, w.rate_limit,
    array_remove(array[w.secret, case when w.previous_secret_until > now()
      then w.previous_secret end], null) as secrets
  from webhook_deliveries d
  join webhooks w on w.account_id = d.account_id and w.id = d.webhook_id
  where d.account_id = ${p.account_id} and d.id = ${p.delivery_id}
  for share of w`

// A rate-limited endpoint's deliveries each take the next free slot, 1/rate_limit seconds after
// the one before, from the webhook row that every worker shares; a slot in the future puts the
// delivery's job off until then, in the same commit as the slot it took. The slot is worked out
// by a SELECT of the locked row and set by value: Citus refuses a timestamptz plus an interval
// of the row's columns in an UPDATE (a STABLE operator over columns, which the shard's node would
// evaluate), and now() in a RETURNING clause. The next slot goes as text, to the microsecond.
const takeSlot = (app: App, p: DeliverWebhookPayload, webhookId: number) =>
  app.sql.begin(async (tx) => {
    const [slot] = await tx`
      select greatest(next_send_at, now()) as at, next_send_at > now() as later,
        (greatest(next_send_at, now()) + make_interval(secs => 1.0 / rate_limit))::text as next
      from webhooks where account_id = ${p.account_id} and id = ${webhookId}
        and rate_limit is not null
      for update`
    if (!slot) return false
    await tx`update webhooks set next_send_at = ${slot.next}::timestamptz
      where account_id = ${p.account_id} and id = ${webhookId}`
    if (!slot.later) return false
    await addJobs(tx, [deliverWebhookJob({ ...p, slotted: true }, slot.at)])
    return true
  })

// The delivery row is locked first so that two jobs of one delivery (a redelivery racing a
// retry) number their attempts one after the other instead of colliding.
const logAttempt = async (tx: Tx, p: DeliverWebhookPayload, at: Date, r: SendResult) => {
  await tx`select 1 from webhook_deliveries where account_id = ${p.account_id}
    and id = ${p.delivery_id} for update`
  const [{ attempt }] = await tx<{ attempt: number }[]>`
    insert into webhook_attempts
      (account_id, delivery_id, attempt, at, status_code, duration_ms, error, response_excerpt)
    select ${p.account_id}, ${p.delivery_id},
      coalesce(max(attempt), 0) + 1, ${at}, ${r.status_code}, ${r.duration_ms}, ${r.error},
        ${r.response_excerpt}
    from webhook_attempts where account_id = ${p.account_id} and delivery_id = ${p.delivery_id}
    returning attempt`
  return attempt
}

// The time chosen here rather than by a CASE: Citus allows no now() inside one in an UPDATE.
const setStatus = (tx: Tx, p: DeliverWebhookPayload, status: 'delivered' | 'failed') => tx`
  update webhook_deliveries set status = ${status},
  delivered_at = ${status === 'delivered' ? tx`now()` : tx`null`}
  where account_id = ${p.account_id} and id = ${p.delivery_id}`

// One attempt per job. The attempt row and what follows from it (the status, or the next
// attempt's job) commit together, so a crash can neither lose a retry nor log an attempt twice.
export const deliverWebhook = async (app: App, p: DeliverWebhookPayload) => {
  const [d] = await load(app.sql, p)
  if (!d || d.status !== 'pending' || d.payload === null) return
  // A disabled webhook's deliveries stay pending, held until enableWebhook sends them.
  if (!d.active) return { delivery: p.delivery_id, outcome: 'held' }
  if (d.rate_limit !== null && !p.slotted && (await takeSlot(app, p, d.webhook_id)))
    return { delivery: p.delivery_id, outcome: 'throttled' }
  const at = new Date()
  const result = await sendWebhook({
    url: d.url,
    body: d.payload,
    headers: {
      // The interface's header holds one value, so it carries the current secret's only.
      'X-service-HMAC': hmacHeader(d.secrets[0], d.payload),
      ...standardWebhookHeaders(d.secrets, d.message_id, Math.floor(Date.now() / 1000), d.payload),
    },
    allowPrivate: app.config.webhookAllowPrivate,
  })
  await app.sql.begin(async (tx) => {
    // The webhook row before the delivery row, in the order enableWebhook locks them, so that the
    // two never wait for each other.
    await recordHealth(
      tx,
      p.account_id,
      d.webhook_id,
      result,
      app.config.webhookDisableAfterSeconds,
    )
    const attempt = await logAttempt(tx, p, at, result)
    const { slotted: _, ...next } = p
    const firstAttempt = p.first_attempt ?? 1
    if (result.outcome === 'delivered') await setStatus(tx, p, 'delivered')
    else if (result.outcome === 'retry' && attempt - firstAttempt + 1 < ATTEMPTS_PER_ROUND) {
      const delay = retryDelaySeconds(attempt - firstAttempt + 1) * app.config.webhookRetryScale
      await addJobs(tx, [
        deliverWebhookJob(
          { ...next, first_attempt: firstAttempt },
          new Date(Date.now() + delay * 1000),
        ),
      ])
    } else await setStatus(tx, p, 'failed')
  })
  return { delivery: p.delivery_id, outcome: result.outcome, status_code: result.status_code }
}
