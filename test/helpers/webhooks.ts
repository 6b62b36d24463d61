import assert from 'node:assert/strict'
import type { TestService } from './service.ts'
import { uploadAndWait } from './fixtures.ts'
import { eventually } from './receiver.ts'

type Account = Awaited<ReturnType<TestService['account']>>

export interface Delivery {
  id: number
  message_id: string
  status: string
  created_at: string
  delivered_at: string | null
  attempts: any[]
}

// Subscribes the account to customer.created at `url`; the secret is only shown here.
export const subscribe = async (s: TestService, accountId: number, url: string) => {
  const hook = await s.admin('POST', `/accounts/${accountId}/webhooks`, {
    url,
    events: ['customer.created'],
  })
  assert.equal(hook.status, 201, JSON.stringify(hook.body))
  return { hookId: hook.body.id as number, secret: hook.body.secret as string }
}

export const upload = (
  account: Account,
  items: object[],
  kind: 'customers' | 'contacts' = 'customers',
) => uploadAndWait(account.api, kind, items)

export const listDeliveries = async (
  s: TestService,
  account: Account,
  hookId: number,
  query = '',
) => {
  const res = await s.admin('GET', `/accounts/${account.id}/webhooks/${hookId}/deliveries${query}`)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body as Delivery[]
}

// Waits until the webhook has `count` deliveries and none of them is pending any more.
export const settled = (
  s: TestService,
  account: Account,
  hookId: number,
  count: number,
  timeoutMs?: number,
) =>
  eventually(
    async () => {
      const list = await listDeliveries(s, account, hookId)
      return list.length === count && list.every((d) => d.status !== 'pending') && list
    },
    `${count} settled deliveries`,
    timeoutMs,
  )

// Jobs of the delivery still queued or running (a retry waiting for its time included).
export const deliveryJobs = async (s: TestService, accountId: number, deliveryId: number) =>
  (
    await s.sql`
  select count(*)::int as n from graphile_worker.jobs
    where key = ${`webhook_delivery:${accountId}:${deliveryId}`}`
  )[0].n as number

// The Standard Webhooks headers as standardwebhooks' verify() wants them.
export const standardHeaders = (h: Record<string, unknown>) => ({
  'webhook-id': String(h['webhook-id']),
  'webhook-timestamp': String(h['webhook-timestamp']),
  'webhook-signature': String(h['webhook-signature']),
})
