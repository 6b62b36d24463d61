import { randomUUID } from 'node:crypto'
import type { Tx } from '../db/client.ts'
import { addJobs, deliverWebhookJob } from '../db/jobs.ts'
import { buildPayloads, type EventItem, type EventName } from './events.ts'

// Disabled webhooks get their deliveries too: held pending until the webhook is enabled again, so
// nothing that happens meanwhile is lost.
const subscribers = (tx: Tx, accountId: number, event: EventName) => tx<{ id: number }[]>`
  select id from webhooks where account_id = ${accountId} and ${event} = any(events) order by id`

const insertDeliveries = (tx: Tx, rows: object[]) =>
  tx`insert into webhook_deliveries ${tx(rows)} returning account_id, id`

// Freezes each payload in one delivery row per webhook and adds their jobs, in the
// caller's transaction.
export const enqueuePayloads = async (
  tx: Tx,
  accountId: number,
  event: string,
  hooks: number[],
  payloads: string[],
) => {
  const deliveries = await insertDeliveries(
    tx,
    hooks.flatMap((webhook_id) =>
      payloads.map((payload) => ({
        account_id: accountId,
        webhook_id,
        event,
        message_id: `msg_${randomUUID()}`,
        payload,
      })),
    ),
  )
  await addJobs(
    tx,
    deliveries.map((d) => deliverWebhookJob({ account_id: d.account_id, delivery_id: d.id })),
  )
  return deliveries
}

// Transactional outbox: called in the transaction that makes the change, it freezes each chunk's
// payload bytes in a delivery row per subscribed webhook and adds its job, so a rollback sends
// nothing and a commit cannot lose an event.
export const enqueueEvent = async <E extends EventName>(
  tx: Tx,
  accountId: number,
  event: E,
  items: EventItem<E>[],
  fields?: Record<string, unknown>,
) => {
  if (items.length === 0) return 0
  const hooks = await subscribers(tx, accountId, event)
  if (hooks.length === 0) return 0
  const payloads = buildPayloads(event, items, new Date().toISOString(), fields)
  return (
    await enqueuePayloads(
      tx,
      accountId,
      event,
      hooks.map((h) => h.id),
      payloads,
    )
  ).length
}
