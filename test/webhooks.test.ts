// customer.created webhooks end to end: uploads over HTTP, the in-process worker delivering to
// real receivers on loopback. Retry delays are scaled down (webhookRetryScale) to keep it quick;
// the 10 s timeout is the real one.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { verify } from '@octokit/webhooks-methods'
import { Webhook } from 'standardwebhooks'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { eventually, startReceiver, type Receiver, type Responder } from './helpers/receiver.ts'
import {
  type Delivery,
  deliveryJobs,
  listDeliveries,
  settled,
  standardHeaders,
  subscribe,
  upload,
} from './helpers/webhooks.ts'
import type { EventItem } from '../src/webhooks/events.ts'
import { enqueueEvent } from '../src/webhooks/outbox.ts'

// Short enough for the rotation and health tests to outwait them.
const GRACE_SECONDS = 4
const DISABLE_AFTER_SECONDS = 3

let s: TestService
const receivers: Receiver[] = []
before(async () => {
  s = await startTestService({
    webhookRetryScale: 0.01,
    apiRateLimit: 100_000,
    webhookSecretGraceSeconds: GRACE_SECONDS,
    webhookDisableAfterSeconds: DISABLE_AFTER_SECONDS,
  })
})
after(async () => {
  await Promise.all(receivers.map((r) => r.close()))
  await s.stop()
})

const sleep = (ms: number) => new Promise((done) => setTimeout(done, Math.max(0, ms)))

const receiver = async (respond?: Responder) => {
  const r = await startReceiver(respond)
  receivers.push(r)
  return r
}

// An account subscribed to customer.created at a fresh receiver.
const subscribed = async (respond?: Responder) => {
  const account = await scoredAccount(s)
  const r = await receiver(respond)
  return { account, r, ...(await subscribe(s, account.id, r.url)) }
}

const customers = (from: number, n: number, name = (i: number) => `Customer ${i}`) =>
  Array.from({ length: n }, (_, i) => ({ external_id: `c${from + i}`, name: name(from + i) }))

const dbCustomers = (accountId: number) => s.sql`
  select service_id, external_id, name, created_at from customers where account_id = ${accountId}
    order by service_id`

const isoUtc = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

test('payload, headers and both signatures of a customer upload', async () => {
  const { account, r, hookId, secret } = await subscribed()
  const started = Date.now()
  await upload(account, [
    { external_id: 'acme-1', name: 'Zoë Ünïcødé 東京' },
    { external_id: 'acme-2', name: '' },
    {
      external_id: 'acme-3',
      name: 'Plain',
      attributes: { country: 'US' },
      metrics: [{ date: '2026-01-01', logins: 3 }],
    },
  ])
  const [delivery] = await settled(s, account, hookId, 1)
  assert.equal(r.requests.length, 1)
  const [req] = r.requests

  assert.equal(req.method, 'POST')
  assert.equal(req.headers['content-type'], 'application/json')
  assert.equal(req.headers['user-agent'], 'Service-Webhook/1.0')
  assert.match(String(req.headers['x-service-hmac']), /^sha256=[0-9a-f]{64}$/)
  assert.equal(
    await verify(secret, req.raw.toString('utf8'), String(req.headers['x-service-hmac'])),
    true,
  )
  assert.equal(
    await verify(
      secret,
      req.raw.toString('utf8').replace('Zoë', 'Zoe'),
      String(req.headers['x-service-hmac']),
    ),
    false,
  )
  assert.deepEqual(
    new Webhook(secret).verify(req.raw, standardHeaders(req.headers)),
    JSON.parse(req.raw.toString('utf8')),
  )
  assert.equal(req.headers['webhook-id'], delivery.message_id)
  assert.match(delivery.message_id, /^msg_/)
  const sentAt = Number(req.headers['webhook-timestamp']) * 1000
  assert.ok(
    sentAt >= Math.floor(started / 1000) * 1000 && sentAt <= Date.now(),
    'webhook-timestamp is the time of sending',
  )

  const body = req.json
  assert.deepEqual(Object.keys(body), ['event', 'timestamp', 'data'])
  assert.equal(body.event, 'customer.created')
  assert.match(body.timestamp, isoUtc)
  assert.ok(
    Date.parse(body.timestamp) >= started - 1000 && Date.parse(body.timestamp) <= Date.now(),
  )
  assert.deepEqual(Object.keys(body.data), ['source', 'customers', 'batch'])
  const acc = await s.admin('GET', `/accounts/${account.id}`)
  assert.equal(acc.body.source_of_truth, 'API')
  assert.equal(body.data.source, acc.body.source_of_truth)
  const stored = await dbCustomers(account.id)
  assert.equal(stored.length, 3)
  assert.deepEqual(
    [...body.data.customers].sort((a, b) => a.service_id - b.service_id),
    stored.map((c) => ({
      service_id: c.service_id,
      external_id: c.external_id,
      name: c.name,
      created_at: c.created_at.toISOString(),
    })),
  )
  for (const c of body.data.customers) {
    assert.deepEqual(Object.keys(c), ['service_id', 'external_id', 'name', 'created_at'])
    assert.equal(typeof c.service_id, 'number')
    assert.match(c.created_at, isoUtc)
  }
  assert.deepEqual(body.data.batch, {
    current_batch: 1,
    total_batches: 1,
    total_customers: 3,
    batch_size: 3,
  })

  // The read endpoint shows the same service_id.
  const read = await account.api('/api/v1/customer/acme-1', undefined, 'GET')
  assert.equal(read.status, 200, JSON.stringify(read.body))
  assert.equal(
    read.body.service_id,
    body.data.customers.find((c: any) => c.external_id === 'acme-1').service_id,
  )

  assert.equal(delivery.status, 'delivered')
  assert.match(delivery.delivered_at!, isoUtc)
  assert.equal(delivery.attempts.length, 1)
  const [attempt] = delivery.attempts
  assert.equal(attempt.attempt, 1)
  assert.equal(attempt.status_code, 200)
  assert.equal(attempt.error, null)
  assert.ok(Number.isInteger(attempt.duration_ms) && attempt.duration_ms >= 0)
  assert.match(attempt.at, isoUtc)
})

test('2500 customers in three uploads: each upload is its own group, every service_id arrives once', async () => {
  const { account, r, hookId } = await subscribed()
  for (const [from, n] of [
    [0, 1000],
    [1000, 1000],
    [2000, 500],
  ])
    await upload(account, customers(from, n))
  await settled(s, account, hookId, 3)
  assert.equal(r.requests.length, 3)
  const seen = new Map<number, number>()
  const sizes = r.requests.map((req) => {
    const { customers: batch, batch: b } = req.json.data
    assert.deepEqual(b, {
      current_batch: 1,
      total_batches: 1,
      total_customers: batch.length,
      batch_size: batch.length,
    })
    for (const c of batch) seen.set(c.service_id, (seen.get(c.service_id) ?? 0) + 1)
    return b.batch_size
  })
  assert.deepEqual(
    sizes.sort((a, b) => b - a),
    [1000, 1000, 500],
  )
  const stored = await dbCustomers(account.id)
  assert.equal(stored.length, 2500)
  assert.deepEqual(
    [...seen.keys()].sort((a, b) => a - b),
    stored.map((c) => c.service_id),
  )
  assert.ok([...seen.values()].every((n) => n === 1))
})

// A group larger than one batch (as a file import's chunk may be) goes out numbered 1..3.
test('a group of 2500 new customers is sent as batches 1..3 that add up', async () => {
  const { account, r, hookId } = await subscribed()
  await s.sql.begin(async (tx) => {
    const created = await tx<EventItem<'customer.created'>[]>`
      insert into customers (account_id, external_id, name)
      select ${account.id}, 'f' || i, 'File ' || i from generate_series(1, 2500) i
      returning service_id, external_id, name, created_at`
    await enqueueEvent(tx, account.id, 'customer.created', created, { source: 'FILE' })
  })
  await settled(s, account, hookId, 3)
  const batches = r.requests
    .map((req) => req.json.data)
    .sort((a, b) => a.batch.current_batch - b.batch.current_batch)
  assert.deepEqual(
    batches.map((d) => d.batch),
    [
      { current_batch: 1, total_batches: 3, total_customers: 2500, batch_size: 1000 },
      { current_batch: 2, total_batches: 3, total_customers: 2500, batch_size: 1000 },
      { current_batch: 3, total_batches: 3, total_customers: 2500, batch_size: 500 },
    ],
  )
  assert.ok(batches.every((d) => d.source === 'FILE' && d.customers.length === d.batch.batch_size))
  const ids = batches
    .flatMap((d) => d.customers.map((c: any) => c.service_id))
    .sort((a, b) => a - b)
  assert.deepEqual(
    ids,
    (await dbCustomers(account.id)).map((c) => c.service_id),
  )
  // One payload time for the whole group; each batch its own message id.
  assert.equal(new Set(r.requests.map((req) => req.json.timestamp)).size, 1)
  assert.equal(new Set(r.requests.map((req) => req.headers['webhook-id'])).size, 3)
})

test('500 then 200: delivered on the second attempt, same id and bytes', async () => {
  const { account, r, hookId, secret } = await subscribed((_req, n) => (n === 1 ? 500 : 200))
  await upload(account, customers(0, 2))
  const [delivery] = await settled(s, account, hookId, 1)
  assert.equal(delivery.status, 'delivered')
  assert.deepEqual(
    delivery.attempts.map((a) => [a.attempt, a.status_code, a.error]),
    [
      [1, 500, null],
      [2, 200, null],
    ],
  )
  assert.ok(Date.parse(delivery.attempts[1].at) > Date.parse(delivery.attempts[0].at))
  assert.equal(r.requests.length, 2)
  assert.deepEqual(r.requests[1].raw, r.requests[0].raw)
  assert.equal(r.requests[1].headers['webhook-id'], r.requests[0].headers['webhook-id'])
  for (const req of r.requests) {
    assert.equal(
      await verify(secret, req.raw.toString('utf8'), String(req.headers['x-service-hmac'])),
      true,
    )
    new Webhook(secret).verify(req.raw, standardHeaders(req.headers))
  }
})

test('always 500: three attempts, then failed; a redelivery gets three more', async () => {
  const { account, r, hookId } = await subscribed(() => 500)
  await upload(account, customers(0, 1))
  const [delivery] = await settled(s, account, hookId, 1)
  assert.equal(delivery.status, 'failed')
  assert.deepEqual(
    delivery.attempts.map((a) => [a.attempt, a.status_code]),
    [
      [1, 500],
      [2, 500],
      [3, 500],
    ],
  )
  await eventually(
    async () => (await deliveryJobs(s, account.id, delivery.id)) === 0,
    'no job left for the failed delivery',
  )
  assert.equal(r.requests.length, 3)

  const again = await s.admin(
    'POST',
    `/accounts/${account.id}/webhooks/${hookId}/deliveries/${delivery.id}/redeliver`,
  )
  assert.equal(again.status, 202, JSON.stringify(again.body))
  assert.deepEqual(again.body, { id: delivery.id, status: 'pending', first_attempt: 4 })
  const [after] = await eventually(async () => {
    const list = await listDeliveries(s, account, hookId)
    return list[0].status === 'failed' && list[0].attempts.length === 6 && list
  }, 'the redelivery to fail again')
  assert.deepEqual(
    after.attempts.map((a) => [a.attempt, a.status_code]),
    [
      [1, 500],
      [2, 500],
      [3, 500],
      [4, 500],
      [5, 500],
      [6, 500],
    ],
  )
  assert.equal(r.requests.length, 6)
  assert.equal(new Set(r.requests.map((req) => req.headers['webhook-id'])).size, 1)
})

test('404 is final after one attempt; redelivered once the receiver is fixed', async () => {
  let status = 404
  const { account, r, hookId } = await subscribed(() => status)
  await upload(account, customers(0, 1))
  const [delivery] = await settled(s, account, hookId, 1)
  assert.equal(delivery.status, 'failed')
  assert.deepEqual(
    delivery.attempts.map((a) => [a.attempt, a.status_code]),
    [[1, 404]],
  )
  assert.equal(r.requests.length, 1)

  status = 200
  const again = await s.admin(
    'POST',
    `/accounts/${account.id}/webhooks/${hookId}/deliveries/${delivery.id}/redeliver`,
  )
  assert.equal(again.status, 202)
  const [done] = await settled(s, account, hookId, 1)
  assert.equal(done.status, 'delivered')
  assert.deepEqual(
    done.attempts.map((a) => [a.attempt, a.status_code]),
    [
      [1, 404],
      [2, 200],
    ],
  )
  assert.equal(r.requests.length, 2)
  assert.equal(r.requests[1].headers['webhook-id'], r.requests[0].headers['webhook-id'])
  assert.deepEqual(r.requests[1].raw, r.requests[0].raw)
})

test('a receiver hanging 12 s times out after 10 s and is retried', async () => {
  const { account, r, hookId } = await subscribed((_req, n) =>
    n === 1 ? new Promise((resolve) => setTimeout(() => resolve(200), 12_000)) : 200,
  )
  await upload(account, customers(0, 1))
  const [delivery] = await settled(s, account, hookId, 1, 60_000)
  assert.equal(delivery.status, 'delivered')
  const [first, second] = delivery.attempts
  assert.equal(delivery.attempts.length, 2)
  assert.equal(first.status_code, null)
  assert.match(first.error, /timeout/)
  assert.ok(first.duration_ms >= 9_900 && first.duration_ms < 12_000, String(first.duration_ms))
  assert.equal(second.status_code, 200)
  assert.equal(r.requests.length, 2)
})

test('re-importing existing external ids sends nothing; only the new ones are sent', async () => {
  const { account, r, hookId } = await subscribed()
  await upload(account, customers(0, 3))
  await settled(s, account, hookId, 1)
  await upload(
    account,
    customers(0, 3, (i) => `Renamed ${i}`),
  )
  const [{ n }] =
    await s.sql`select count(*)::int as n from webhook_deliveries where account_id = ${account.id}`
  assert.equal(n, 1, 'the re-import wrote no delivery')
  await upload(account, customers(1, 4))
  const list = await settled(s, account, hookId, 2)
  assert.equal(r.requests.length, 2)
  const newest = r.requests.find((req) => req.headers['webhook-id'] === list[0].message_id)!
  assert.deepEqual(newest.json.data.customers.map((c: any) => c.external_id).sort(), ['c3', 'c4'])
  assert.deepEqual(newest.json.data.batch, {
    current_batch: 1,
    total_batches: 1,
    total_customers: 2,
    batch_size: 2,
  })
})

test('contacts never send', async () => {
  const { account, r, hookId } = await subscribed()
  await upload(account, customers(0, 1))
  await settled(s, account, hookId, 1)
  await upload(
    account,
    [
      { customer_external_id: 'c0', contact_external_id: 'p1', contact_name: 'Pat' },
      { customer_external_id: 'c0', contact_external_id: 'p2', contact_name: 'Sam' },
    ],
    'contacts',
  )
  const [{ contacts }] =
    await s.sql`select count(*)::int as contacts from contacts where account_id = ${account.id}`
  assert.equal(contacts, 2)
  const [{ n }] =
    await s.sql`select count(*)::int as n from webhook_deliveries where account_id = ${account.id}`
  assert.equal(n, 1)
  assert.equal(r.requests.length, 1)
})

test('a single-customer create sends its webhook', async () => {
  const { account, r, hookId } = await subscribed()
  const res = await account.api('/api/v1/customer', { external_id: 'solo', name: 'Solo' })
  assert.ok(res.status === 200 || res.status === 201, JSON.stringify(res.body))
  await settled(s, account, hookId, 1)
  assert.deepEqual(
    r.requests[0].json.data.customers.map((c: any) => c.external_id),
    ['solo'],
  )
})

test('deliveries listing: newest first, limit, 404s and 400s', async () => {
  const { account, hookId } = await subscribed()
  for (let i = 0; i < 3; i++) await upload(account, customers(i * 10, 1))
  const all = await settled(s, account, hookId, 3)
  assert.deepEqual(
    all.map((d) => d.id),
    [...all.map((d) => d.id)].sort((a, b) => b - a),
  )
  assert.ok(all.every((d) => d.status === 'delivered' && d.attempts.length === 1))
  const two = await listDeliveries(s, account, hookId, '?limit=2')
  assert.deepEqual(
    two.map((d) => d.id),
    all.slice(0, 2).map((d) => d.id),
  )
  const base = `/accounts/${account.id}/webhooks/${hookId}`
  assert.equal((await s.admin('GET', `${base}/deliveries?limit=0`)).status, 400)
  assert.equal((await s.admin('GET', `${base}/deliveries?limit=x`)).status, 400)
  assert.equal(
    (await s.admin('GET', `/accounts/${account.id}/webhooks/999999/deliveries`)).status,
    404,
  )
  assert.equal((await s.admin('POST', `${base}/deliveries/999999/redeliver`)).status, 404)
  // Another account's webhook and delivery are not reachable.
  const other = await scoredAccount(s)
  assert.equal(
    (await s.admin('GET', `/accounts/${other.id}/webhooks/${hookId}/deliveries`)).status,
    404,
  )
  assert.equal(
    (
      await s.admin(
        'POST',
        `/accounts/${other.id}/webhooks/${hookId}/deliveries/${all[0].id}/redeliver`,
      )
    ).status,
    404,
  )
})

type Account = Awaited<ReturnType<typeof scoredAccount>>
const hookOf = async (account: Account, hookId: number) =>
  (await s.admin('GET', `/accounts/${account.id}/webhooks`)).body.find(
    (h: { id: number }) => h.id === hookId,
  )
const enable = async (account: Account, hookId: number) => {
  const res = await s.admin('POST', `/accounts/${account.id}/webhooks/${hookId}/enable`)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}
const disabledNotices = async (account: Account) =>
  (await s.admin('GET', `/accounts/${account.id}/notifications`)).body.filter(
    (n: { kind: string }) => n.kind === 'webhook.disabled',
  )
// The newest delivery once its jobs are done: a held one stays pending with no job left.
const newestAtRest = async (account: Account, hookId: number) => {
  const [newest] = await listDeliveries(s, account, hookId)
  await eventually(
    async () => (await deliveryJobs(s, account.id, newest.id)) === 0,
    'the job to finish',
  )
  return (await listDeliveries(s, account, hookId))[0]
}

test('410 Gone disables at once and tells every user; what comes meanwhile is held and sent on enable', async () => {
  let status = 410
  const { account, r, hookId } = await subscribed(() => status)
  await s.admin('POST', `/accounts/${account.id}/users`, { email: 'second@acme.test' })
  await upload(account, customers(0, 1))
  const [gone] = await settled(s, account, hookId, 1)
  assert.equal(gone.status, 'failed')
  assert.deepEqual(
    gone.attempts.map((a) => a.status_code),
    [410],
  )
  // The list says why: disabled by the service, failing since the attempt, which it names.
  const disabled = await hookOf(account, hookId)
  assert.deepEqual([disabled.active, disabled.disabled_by], [false, 'service'])
  assert.deepEqual(
    { ...disabled.last_failure, at: undefined },
    { at: undefined, status_code: 410, error: null },
  )
  assert.ok(Math.abs(Date.parse(disabled.last_failure.at) - Date.parse(gone.attempts[0].at)) < 5000)
  assert.ok(Date.parse(disabled.failing_since) >= Date.parse(gone.attempts[0].at) - 1000)
  const notices = await disabledNotices(account)
  assert.deepEqual(notices.map((n: { user_email: string }) => n.user_email).sort(), [
    'owner@acme.test',
    'second@acme.test',
  ])
  for (const n of notices) {
    assert.deepEqual(
      [n.body.webhook_id, n.body.url, n.body.reason, n.body.status_code],
      [hookId, r.url, 'gone', 410],
    )
  }

  await upload(account, customers(1, 1))
  const held = await newestAtRest(account, hookId)
  assert.deepEqual([held.status, held.attempts], ['pending', []])
  assert.equal(r.requests.length, 1)

  status = 200
  const enabled = await enable(account, hookId)
  assert.deepEqual([enabled.id, enabled.active, enabled.resumed], [hookId, true, 1])
  const [sent, failed] = await settled(s, account, hookId, 2)
  assert.deepEqual([sent.id, sent.status, failed.status], [held.id, 'delivered', 'failed'])
  assert.equal(r.requests.length, 2)
  assert.equal(r.requests[1].headers['webhook-id'], held.message_id)
  assert.equal(r.requests[1].json.data.customers[0].external_id, 'c1')
  assert.equal(
    (await enable(account, hookId)).resumed,
    0,
    'enabling an active webhook resends nothing',
  )
  const healthy = await hookOf(account, hookId)
  assert.deepEqual([healthy.active, healthy.disabled_by, healthy.failing_since], [true, null, null])
  assert.equal(healthy.last_failure.status_code, 410, 'the latest failure stays known')
  const paused = await s.admin('POST', `/accounts/${account.id}/webhooks/${hookId}/disable`)
  assert.deepEqual([paused.body.active, paused.body.disabled_by], [false, 'operator'])
  await enable(account, hookId)
  assert.equal((await disabledNotices(account)).length, 2)

  assert.equal(
    (await s.admin('POST', `/accounts/${account.id}/webhooks/999999/enable`)).status,
    404,
  )
  const other = await scoredAccount(s)
  assert.equal(
    (await s.admin('POST', `/accounts/${other.id}/webhooks/${hookId}/enable`)).status,
    404,
  )
})

test('failing for the whole configured period disables; a success restarts the count; enable resumes', async () => {
  let status = 500
  const { account, r, hookId } = await subscribed(() => status)
  // Comfortably past the period after the run of failures that began with this delivery's
  // first attempt.
  const periodAfter = (d: Delivery) =>
    sleep(
      Date.parse(d.attempts[0].at) +
        d.attempts[0].duration_ms +
        DISABLE_AFTER_SECONDS * 1000 +
        500 -
        Date.now(),
    )
  await upload(account, customers(0, 1))
  const [first] = await settled(s, account, hookId, 1)
  assert.equal(first.status, 'failed')
  status = 200
  await upload(account, customers(1, 1))
  assert.equal((await settled(s, account, hookId, 2))[0].status, 'delivered')

  await periodAfter(first)
  status = 500
  const restarted = Date.now()
  await upload(account, customers(2, 1))
  const [again] = await settled(s, account, hookId, 3)
  assert.equal(again.status, 'failed')
  assert.equal(
    (await hookOf(account, hookId)).active,
    true,
    'failing for less than the period since the success',
  )
  assert.deepEqual(await disabledNotices(account), [])

  await periodAfter(again)
  const before = r.requests.length
  await upload(account, customers(3, 1))
  const held = await newestAtRest(account, hookId)
  assert.equal((await hookOf(account, hookId)).active, false)
  assert.equal(r.requests.length, before + 1, 'one attempt, then held')
  assert.deepEqual([held.status, held.attempts.map((a) => a.status_code)], ['pending', [500]])
  const [notice] = await disabledNotices(account)
  assert.deepEqual([notice.body.reason, notice.body.status_code], ['failing', 500])
  assert.ok(Date.parse(notice.body.failing_since) >= restarted - 1000)

  status = 200
  assert.equal((await enable(account, hookId)).resumed, 1)
  const [done] = await settled(s, account, hookId, 4)
  assert.equal(done.id, held.id)
  assert.deepEqual(
    done.attempts.map((a) => [a.attempt, a.status_code]),
    [
      [1, 500],
      [2, 200],
    ],
  )
  assert.equal(r.requests.at(-1)!.headers['webhook-id'], held.message_id)
})

test('a redelivery to a disabled webhook is held until the webhook is enabled', async () => {
  const { account, r, hookId } = await subscribed()
  await upload(account, customers(0, 1))
  const [delivery] = await settled(s, account, hookId, 1)
  await s.sql`update webhooks set active = false where account_id = ${account.id}
    and id = ${hookId}`
  assert.equal(
    (
      await s.admin(
        'POST',
        `/accounts/${account.id}/webhooks/${hookId}/deliveries/${delivery.id}/redeliver`,
      )
    ).status,
    202,
  )
  const held = await newestAtRest(account, hookId)
  assert.deepEqual([held.status, held.attempts.length, r.requests.length], ['pending', 1, 1])
  assert.equal((await enable(account, hookId)).resumed, 1)
  const [done] = await settled(s, account, hookId, 1)
  assert.deepEqual(
    done.attempts.map((a) => [a.attempt, a.status_code]),
    [
      [1, 200],
      [2, 200],
    ],
  )
  assert.equal(r.requests.length, 2)
})

test('recover: the failed deliveries since a time go again in their original order, webhook-id unchanged', async () => {
  let status = 400
  // Answers after a random pause once fixed, so that deliveries sent side by side would
  // arrive shuffled.
  const { account, r, hookId } = await subscribed(async () =>
    status === 200 ? sleep(Math.random() * 40).then(() => 200) : status,
  )
  await upload(account, customers(0, 1))
  const [older] = await settled(s, account, hookId, 1)
  await sleep(20)
  const since = new Date().toISOString()
  for (let i = 1; i <= 3; i++) await upload(account, customers(i, 1))
  const failed = (await settled(s, account, hookId, 4)).slice(0, 3).reverse()
  assert.deepEqual(
    [...failed, older].map((d) => d.status),
    ['failed', 'failed', 'failed', 'failed'],
  )
  assert.equal(r.requests.length, 4)
  const firstIds = r.requests.slice(1).map((req) => req.headers['webhook-id'])

  status = 200
  const base = `/accounts/${account.id}/webhooks/${hookId}`
  const recovered = await s.admin('POST', `${base}/recover`, { since })
  assert.equal(recovered.status, 202, JSON.stringify(recovered.body))
  assert.deepEqual(recovered.body, { recovered: 3 })
  const after = await settled(s, account, hookId, 4)
  assert.deepEqual(
    after.map((d) => [d.id, d.status, d.attempts.map((a) => a.status_code)]),
    [...failed.map((d) => [d.id, 'delivered', [400, 200]]).reverse(), [older.id, 'failed', [400]]],
  )
  const resent = r.requests.slice(4)
  assert.deepEqual(
    resent.map((req) => req.headers['webhook-id']),
    failed.map((d) => d.message_id),
    'in the order they were created',
  )
  assert.deepEqual(
    resent.map((req) => req.headers['webhook-id']),
    firstIds,
  )
  assert.deepEqual(
    resent.map((req) => req.json.data.customers[0].external_id),
    ['c1', 'c2', 'c3'],
  )
  assert.deepEqual((await s.admin('POST', `${base}/recover`, { since })).body, { recovered: 0 })

  const refused = async (body: unknown) => (await s.admin('POST', `${base}/recover`, body)).status
  assert.equal(await refused({ since: 'yesterday' }), 400)
  assert.equal(await refused({ since: '2026-01-31T09:00:00+01' }), 400)
  assert.equal(await refused({}), 400)
  assert.equal(await refused({ since, extra: 1 }), 400)
  assert.equal(
    (await s.admin('POST', `/accounts/${account.id}/webhooks/999999/recover`, { since })).status,
    404,
  )
  const other = await scoredAccount(s)
  assert.equal(
    (await s.admin('POST', `/accounts/${other.id}/webhooks/${hookId}/recover`, { since })).status,
    404,
  )
})

test('rotate-secret: both signatures during the grace period, then only the new one', async () => {
  const { account, r, hookId, secret: old } = await subscribed()
  const rotatedAt = Date.now()
  const rotated = await s.admin('POST', `/accounts/${account.id}/webhooks/${hookId}/rotate-secret`)
  assert.equal(rotated.status, 200)
  const secret = rotated.body.secret as string
  assert.notEqual(secret, old)
  const verifies = (key: string, req: (typeof r.requests)[number]) => {
    try {
      return !!new Webhook(key).verify(req.raw, standardHeaders(req.headers))
    } catch {
      return false
    }
  }

  await upload(account, customers(0, 1))
  await settled(s, account, hookId, 1)
  const [during] = r.requests
  assert.ok(
    Date.now() - rotatedAt < GRACE_SECONDS * 1000,
    'the first delivery came within the grace period',
  )
  assert.equal(String(during.headers['webhook-signature']).split(' ').length, 2)
  assert.equal(verifies(secret, during), true, 'a receiver holding only the new secret')
  assert.equal(verifies(old, during), true, 'a receiver holding only the old secret')
  const hmac = String(during.headers['x-service-hmac'])
  assert.equal(await verify(secret, during.raw.toString('utf8'), hmac), true)
  assert.equal(await verify(old, during.raw.toString('utf8'), hmac), false)

  await sleep(rotatedAt + GRACE_SECONDS * 1000 + 200 - Date.now())
  await upload(account, customers(1, 1))
  await settled(s, account, hookId, 2)
  const after = r.requests[1]
  assert.equal(String(after.headers['webhook-signature']).split(' ').length, 1)
  assert.equal(verifies(secret, after), true)
  assert.equal(verifies(old, after), false)
  assert.equal(
    await verify(secret, after.raw.toString('utf8'), String(after.headers['x-service-hmac'])),
    true,
  )
})

test('the SSRF guard also holds at sending time', async () => {
  const guarded = await startTestService({ webhookAllowPrivate: false, apiRateLimit: 100_000 })
  try {
    const account = await scoredAccount(guarded)
    const r = await receiver()
    const refused = await guarded.admin('POST', `/accounts/${account.id}/webhooks`, {
      url: r.url,
      events: ['customer.created'],
    })
    assert.equal(refused.status, 400)
    // As if the URL had been allowed when it was added (or the flag turned off since).
    const [hook] = await guarded.sql`
      insert into webhooks (account_id, url, events, secret)
      values (${account.id}, ${r.url}, ${['customer.created']}, 'whsec_x') returning id`
    await uploadAndWait(account.api, 'customers', customers(0, 1))
    const [delivery] = await eventually(async () => {
      const list = (
        await guarded.admin('GET', `/accounts/${account.id}/webhooks/${hook.id}/deliveries`)
      ).body
      return list.length === 1 && list[0].status !== 'pending' && list
    }, 'the refused delivery')
    assert.equal(delivery.status, 'failed')
    assert.equal(delivery.attempts.length, 1)
    assert.equal(delivery.attempts[0].status_code, null)
    assert.equal(delivery.attempts[0].response_excerpt, null)
    assert.match(delivery.attempts[0].error, /https/)
    assert.equal(r.requests.length, 0)
  } finally {
    await guarded.stop()
  }
})

// The delivery log shows the start of what the receiver answered, refusals especially.
test("each attempt keeps the first 500 characters of the receiver's answer", async () => {
  const answers = ['', 'ok', `${'é'.repeat(499)}xyz${'z'.repeat(5000)}`]
  let n = 0
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(n === 2 ? 422 : 200).end(answers[n++]))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const account = await scoredAccount(s)
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
    const hook = await s.admin('POST', `/accounts/${account.id}/webhooks`, {
      url,
      events: ['customer.created'],
    })
    for (let i = 0; i < 3; i++) {
      const sent = await s.admin('POST', `/accounts/${account.id}/webhooks/${hook.body.id}/test`, {
        event: 'customer.created',
      })
      assert.equal(sent.status, 202)
      await settled(s, account, hook.body.id, i + 1)
    }
    const log = (await listDeliveries(s, account, hook.body.id)).reverse()
    assert.deepEqual(
      log.map((d) => [d.status, d.attempts[0].status_code, d.attempts[0].response_excerpt]),
      [
        ['delivered', 200, ''],
        ['delivered', 200, 'ok'],
        ['failed', 422, `${'é'.repeat(499)}x`],
      ],
    )
  } finally {
    server.close()
  }
})
