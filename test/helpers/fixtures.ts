import assert from 'node:assert/strict'
import type { TestService } from './service.ts'

type Account = Awaited<ReturnType<TestService['account']>>

// An account with a customer scoring model, a few typed properties and a user: ready for uploads.
export const scoredAccount = async (s: TestService, name = 'Acme') =>
  scoreAccount(s, await s.account(name))

// The same for an account made already (a test that picks its accounts first, by shard say).
export const scoreAccount = async (s: TestService, account: Account) => {
  const define = (entity: string, kind: string, codename: string, type: string) =>
    s.admin('POST', `/accounts/${account.id}/properties`, { entity, kind, codename, type })
  await define('customer', 'metric', 'logins', 'number')
  await define('customer', 'metric', 'seats', 'number')
  await define('customer', 'attribute', 'country', 'string')
  await define('customer', 'attribute', 'has_sso', 'boolean')
  await define('customer', 'attribute', 'plan_started', 'date')
  await define('contact', 'metric', 'sessions', 'number')
  await define('contact', 'attribute', 'role', 'string')
  const model = await s.admin('PUT', `/accounts/${account.id}/scoring`, {
    customer: {
      engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }],
      fit: [
        { codename: 'country', weight: 50, values: { US: 100, DE: 50 }, default: -100 },
        { codename: 'has_sso', weight: 50, good: true },
      ],
    },
    contact: { engagement: [{ codename: 'sessions', weight: 100, bad: 0, good: 20 }] },
  })
  if (model.status !== 200) throw new Error(`scoring model: ${JSON.stringify(model.body)}`)
  await s.admin('POST', `/accounts/${account.id}/users`, {
    email: 'owner@acme.test',
    name: 'Owner',
  })
  return account
}

// Polls the upload until it leaves received/processing (and, with `scored`, until its records
// are scored too).
export const waitForUpload = async (
  api: ReturnType<TestService['api']>,
  uploadId: number,
  timeoutMs = 30_000,
  scored = false,
) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const res = await api(`/api/v1/uploads/${uploadId}`, undefined, 'GET')
    if (res.status !== 200)
      throw new Error(`upload ${uploadId}: ${res.status} ${JSON.stringify(res.body)}`)
    if (!['received', 'processing'].includes(res.body.status) && (!scored || res.body.scored_at))
      return res.body
    if (Date.now() > deadline) throw new Error(`upload ${uploadId} still ${res.body.status}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

// Sends one upload and waits for it (see waitForUpload): the upload as it ended, which must be
// `status` (processed unless told; null takes any end).
export const uploadAndWait = async (
  api: ReturnType<TestService['api']>,
  kind: 'customers' | 'contacts',
  items: readonly unknown[],
  { scored = false, timeoutMs = 60_000, status = 'processed' as string | null } = {},
) => {
  const res = await api(`/api/v1/${kind}`, { [kind]: items })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  const done = await waitForUpload(api, res.body.upload_id, timeoutMs, scored)
  if (status !== null) assert.equal(done.status, status, JSON.stringify(done))
  return done
}
