import { randomUUID } from 'node:crypto'
import type { Tx } from '../db/client.ts'
import { addJobs, deliverWebhookJob } from '../db/jobs.ts'
import { buildCustomerCreatedPayloads } from './payload.ts'

export interface Created {
  service_id: number
  external_id: string
  name: string | null
  created_at: Date
}

// Disabled webhooks get their deliveries too: held pending until the webhook is enabled again, so
// nothing that happens meanwhile is lost.
const subscribers = (tx: Tx, accountId: number) => tx`
  select id from webhooks where account_id = ${accountId} and 'customer.created' = any(events) order by id`

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
    customers.map((c) => ({ ...c, created_at: c.created_at.toISOString() })),
    source,
    new Date().toISOString(),
  )
  const deliveries = await insertDeliveries(
    tx,
    hooks.flatMap((hook) =>
      payloads.map((payload) => ({
        account_id: accountId,
        webhook_id: hook.id,
        event: 'customer.created',
        message_id: `msg_${randomUUID()}`,
        payload,
      })),
    ),
  )
  await addJobs(
    tx,
    deliveries.map((d) => deliverWebhookJob({ account_id: d.account_id, delivery_id: d.id })),
  )
  return deliveries.length
}
