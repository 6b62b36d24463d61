import { randomUUID } from 'node:crypto'
import { buildCustomerCreatedPayloads } from './payload.ts'
import { addJobs, type JobSpec } from '../jobs/enqueue.ts'
import type { Tx } from '../db/client.ts'

export interface DeliverWebhookPayload {
  account_id: number
  delivery_id: number
  // The attempt number this round of (up to MAX_ATTEMPTS) attempts started at: 1, or the next
  // number after the attempts already logged when the delivery was redelivered.
  first_attempt?: number
}

// The webhook's own retries are new jobs scheduled by the task (5 s, 25 s), so graphile-worker's
// attempts only come into play when a worker dies mid-job (the stale lock is recovered and the
// job runs again) or the task throws on a database error; with maxAttempts 1 such a job could
// never run again. The key keeps at most one waiting job per delivery: a redelivery replaces a
// waiting retry instead of adding a second sender.
export const deliveryJob = (payload: DeliverWebhookPayload, runAt?: Date): JobSpec => ({
  task: 'deliver_webhook', payload: { ...payload }, runAt, maxAttempts: 5,
  jobKey: `webhook_delivery:${payload.account_id}:${payload.delivery_id}`,
})

export interface Created { service_id: number; external_id: string; name: string | null; created_at: Date }

const subscribers = (tx: Tx, accountId: number) => tx`
  select id from webhooks where account_id = ${accountId} and active and 'customer.created' = any(events) order by id`

const insertDeliveries = (tx: Tx, rows: object[]) =>
  tx`insert into webhook_deliveries ${tx(rows as never)} returning account_id, id`

// Transactional outbox: called in the transaction that inserts the customers, it freezes each
// batch's payload bytes in a delivery row and adds its job, so a rollback sends nothing and a
// commit cannot lose a webhook.
export const enqueueCustomerCreated = async (tx: Tx, accountId: number, source: string, customers: Created[]) => {
  if (customers.length === 0) return 0
  const hooks = await subscribers(tx, accountId)
  if (hooks.length === 0) return 0
  const payloads = buildCustomerCreatedPayloads(
    customers.map((c) => ({ ...c, created_at: c.created_at.toISOString() })), source, new Date().toISOString())
  const deliveries = await insertDeliveries(tx, hooks.flatMap((hook) => payloads.map((payload) => ({
    account_id: accountId, webhook_id: hook.id, event: 'customer.created', message_id: `msg_${randomUUID()}`, payload,
  }))))
  await addJobs(tx, deliveries.map((d) => deliveryJob({ account_id: d.account_id, delivery_id: d.id })))
  return deliveries.length
}
