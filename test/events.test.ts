// The events beyond customer.created, end to end with real receivers: each is opt-in per
// subscription, matches the schema GET /admin/v1/event-types publishes, and is signed like every
// delivery; score alerts fire on crossings and deltas only; test-send and the rate limit.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { scoreDaily } from '../src/scoring/daily.ts'
import { validator } from './helpers/openapi.ts'
import { eventually, type Receiver, startReceiver } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { standardHeaders } from './helpers/webhooks.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
const receivers: Receiver[] = []
const validate = new Map<string, (payload: unknown) => boolean>()
const secrets = new Map<number, string>()

before(async () => {
  s = await startTestService()
  const types = await s.admin('GET', '/event-types')
  assert.equal(types.status, 200)
  const ajv = validator({ formats: true })
  for (const t of types.body) validate.set(t.name, ajv.compile(t.schema))
})
after(async () => {
  for (const r of receivers) await r.close()
  await s.stop()
})

const receiver = async () => {
  const r = await startReceiver()
  receivers.push(r)
  return r
}

const subscribe = async (account: Account, url: string, events: string[], extra: object = {}) => {
  const hook = await s.admin('POST', `/accounts/${account.id}/webhooks`, { url, events, ...extra })
  assert.equal(hook.status, 201, JSON.stringify(hook.body))
  secrets.set(hook.body.id, hook.body.secret)
  return hook.body.id as number
}

// Every request a receiver got: signed with its webhook's secret and valid under its
// event's schema.
const checked = (r: Receiver, hookId: number) =>
  r.requests.map((req) => {
    new Webhook(secrets.get(hookId)!.slice('whsec_'.length)).verify(
      req.raw,
      standardHeaders(req.headers),
    )
    const check = validate.get(req.json.event)
    assert.ok(check, `unknown event ${req.json.event}`)
    assert.ok(check(req.json), `${req.json.event}: ${JSON.stringify(req.json)}`)
    return req.json
  })

const uploadScored = (account: Account, kind: 'customers' | 'contacts', items: object[]) =>
  uploadAndWait(account.api, kind, items, { scored: true })

// No delivery job of the account left: what the last change sends has been sent.
const quiet = (account: Account) =>
  eventually(
    async () =>
      (
        await s.sql`
          select count(*)::int as n from graphile_worker._private_jobs
          where payload->>'account_id' = ${String(account.id)}`
      )[0].n === 0,
    'jobs done',
  )

const setModel = async (account: Account, model: object) =>
  assert.equal((await s.admin('PUT', `/accounts/${account.id}/scoring`, model)).status, 200)

const logins = { customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 10 }] } }

test('every catalog example passes its published schema, and a subscription takes only catalog events', async () => {
  const types = (await s.admin('GET', '/event-types')).body
  assert.deepEqual(
    types.map((t: { name: string }) => t.name),
    [
      'customer.created',
      'contact.created',
      'customer.churned',
      'customer.reactivated',
      'customer.score_changed',
      'segment.entered',
      'segment.exited',
    ],
  )
  for (const t of types) assert.ok(validate.get(t.name)!(t.example), t.name)
  assert.equal(validate.get('customer.churned')!(types[0].example), false)
  const a = await s.account('Catalog')
  const bad = await s.admin('POST', `/accounts/${a.id}/webhooks`, {
    url: 'http://127.0.0.1:9/x',
    events: ['order.paid'],
  })
  assert.equal(bad.status, 400)
  assert.equal(bad.body.errors[0].path, '/events/0')
})

test('contact.created goes to its subscribers only, with the source and the customer', async () => {
  const a = await scoredAccount(s, 'Contacts')
  const [both, created] = [await receiver(), await receiver()]
  const bothHook = await subscribe(a, both.url, ['customer.created', 'contact.created'])
  const createdHook = await subscribe(a, created.url, ['customer.created'])
  await uploadScored(a, 'customers', [{ external_id: 'acme', name: 'Acme' }])
  await uploadScored(a, 'contacts', [
    { contact_external_id: 'pat', contact_name: 'Pat', customer_external_id: 'acme' },
    { contact_external_id: 'sam', contact_name: 'Sam', customer_external_id: 'acme' },
  ])
  // An update creates nothing.
  await uploadScored(a, 'contacts', [
    { contact_external_id: 'pat', contact_name: 'Pat D', customer_external_id: 'acme' },
  ])
  await quiet(a)
  const got = checked(both, bothHook)
  assert.deepEqual(got.map((p) => p.event).sort(), ['contact.created', 'customer.created'])
  const contacts = got.find((p) => p.event === 'contact.created')
  assert.equal(contacts.data.source, 'API')
  assert.deepEqual(
    contacts.data.contacts.map((c: any) => [c.contact_external_id, c.name, c.customer_external_id]),
    [
      ['pat', 'Pat', 'acme'],
      ['sam', 'Sam', 'acme'],
    ],
  )
  assert.deepEqual(contacts.data.batch, {
    current_batch: 1,
    total_batches: 1,
    total_contacts: 2,
    batch_size: 2,
  })
  assert.deepEqual(
    checked(created, createdHook).map((p) => p.event),
    ['customer.created'],
  )
})

test('customer.churned and customer.reactivated, by hand and automatically, each once', async () => {
  const a = await scoredAccount(s, 'Churn')
  const r = await receiver()
  const hook = await subscribe(a, r.url, ['customer.churned', 'customer.reactivated'])
  await setModel(a, { ...logins, churn: { inactive_days: 30 } })
  await uploadScored(a, 'customers', [
    { external_id: 'manual', name: 'Manual', metrics: [{ date: '2026-11-01', logins: 3 }] },
    { external_id: 'auto', name: 'Auto', metrics: [{ date: '2026-11-01', logins: 3 }] },
  ])
  const put = (body: object) => a.api('/api/v1/customer/manual', body, 'PUT')
  assert.equal((await put({ is_churned: true, churned_date: '2026-11-20' })).status, 200)
  // Already churned: a new date, no event.
  assert.equal((await put({ is_churned: true, churned_date: '2026-11-21' })).status, 200)
  assert.equal((await put({ is_churned: false })).status, 200)
  // Already active: no event.
  assert.equal((await put({ is_churned: false })).status, 200)
  // The daily run of a later day churns both (manual is active again); a newer snapshot
  // lifts auto's.
  await scoreDaily(s.sql, a.id, '2027-01-15')
  await uploadScored(a, 'customers', [
    { external_id: 'auto', name: 'Auto', metrics: [{ date: '2027-01-15', logins: 4 }] },
  ])
  await quiet(a)
  // One delivery per change, in the order of the changes; the daily run's two churns share one.
  const events = checked(r, hook)
    .sort((x, y) => x.timestamp.localeCompare(y.timestamp))
    .flatMap((p) =>
      p.data.customers.map((c: any) => [p.event, c.external_id, c.churned_date, c.reason]).sort(),
    )
  assert.deepEqual(events, [
    ['customer.churned', 'manual', '2026-11-20', 'manual'],
    ['customer.reactivated', 'manual', '2026-11-21', 'manual'],
    ['customer.churned', 'auto', '2027-01-15', 'inactive'],
    ['customer.churned', 'manual', '2027-01-15', 'inactive'],
    ['customer.reactivated', 'auto', '2027-01-15', 'activity'],
  ])
})

test('customer.score_changed on a threshold crossing or a delta, in both directions, with change_drivers', async () => {
  const a = await scoredAccount(s, 'Scores')
  const r = await receiver()
  const hook = await subscribe(a, r.url, ['customer.score_changed'])
  await setModel(a, logins)
  const alerts = { engagementscore: { thresholds: [50], delta: 100 } }
  assert.deepEqual((await s.admin('PUT', `/accounts/${a.id}/score-alerts`, alerts)).body, alerts)
  assert.deepEqual((await s.admin('GET', `/accounts/${a.id}/score-alerts`)).body, alerts)
  const snapshot = async (date: string, count: number) => {
    await uploadScored(a, 'customers', [
      { external_id: 'c', name: 'C', metrics: [{ date, logins: count }] },
    ])
    await quiet(a)
  }
  // engagement = -100 + 20 * logins: -60 (first score: nothing to compare), -20 (below 50, moved
  // 40), 60 (crossed 50 upward), 80 (above, moved 20), -100 (crossed 50 downward and moved 180).
  await snapshot('2026-11-01', 2)
  await snapshot('2026-11-02', 4)
  assert.equal(r.requests.length, 0)
  await snapshot('2026-11-03', 8)
  await snapshot('2026-11-04', 9)
  await snapshot('2026-11-05', 0)
  const changes = checked(r, hook).flatMap((p) => p.data.changes)
  assert.deepEqual(
    changes.map((c: any) => [c.external_id, c.score, c.old_value, c.new_value, c.crossed]),
    [
      ['c', 'engagementscore', -20, 60, 50],
      ['c', 'engagementscore', 80, -100, 50],
    ],
  )
  assert.deepEqual(changes[0].change_drivers, [
    { score: 'engagement', codename: 'logins', before: -20, after: 60 },
  ])
  assert.deepEqual(changes[1].change_drivers, [
    { score: 'engagement', codename: 'logins', before: 80, after: -100 },
  ])
  assert.equal(changes[1].scoring_date, new Date().toISOString().slice(0, 10))
  const customer = (await a.api('/api/v1/customer/c', undefined, 'GET')).body
  assert.deepEqual(
    customer.score_explanation.change_drivers,
    changes[1].change_drivers.map((d: any) => ({ ...d, label: d.codename })),
  )

  // A delta alone: churn risk moving by 10 or more, without a threshold.
  await s.admin('PUT', `/accounts/${a.id}/score-alerts`, { churn_risk: { delta: 10 } })
  await quiet(a)
  await snapshot('2026-11-06', 5)
  const last = checked(r, hook).at(-1).data.changes
  assert.deepEqual(
    last.map((c: any) => [c.score, c.crossed, Math.abs(c.new_value - c.old_value) >= 10]),
    [['churn_risk', null, true]],
  )
  // {} turns alerts off: no event, and the stored contributions are gone.
  await s.admin('PUT', `/accounts/${a.id}/score-alerts`, {})
  await snapshot('2026-11-07', 10)
  assert.equal(checked(r, hook).length, 3)
  assert.equal(
    (
      await s.sql`select count(*)::int as n from customer_contributions where account_id = ${a.id}`
    )[0].n,
    0,
  )
})

test('score alerts and webhook changes refuse bad input with the path', async () => {
  const a = await s.account('Refusals')
  const put = (body: object) => s.admin('PUT', `/accounts/${a.id}/score-alerts`, body)
  for (const [body, path] of [
    [{ engagement: { delta: 5 } }, '/engagement'],
    [{ churn_risk: { thresholds: [101] } }, '/churn_risk/thresholds/0'],
    [{ churn_risk: { delta: 0 } }, '/churn_risk/delta'],
    [{ fitscore: { thresholds: Array.from({ length: 11 }, (_, i) => i) } }, '/fitscore/thresholds'],
    [{ fitscore: { thresold: [1] } }, '/fitscore/thresold'],
  ] as const) {
    const res = await put(body)
    assert.equal(res.status, 400, JSON.stringify(body))
    assert.equal(res.body.errors[0].path, path, JSON.stringify(res.body))
  }
  assert.deepEqual((await s.admin('GET', `/accounts/${a.id}/score-alerts`)).body, {})
  const r = await receiver()
  const hook = await subscribe(a, r.url, ['customer.created'])
  const patch = (body: object) => s.admin('PATCH', `/accounts/${a.id}/webhooks/${hook}`, body)
  assert.equal((await patch({ rate_limit: 0 })).body.errors[0].path, '/rate_limit')
  assert.equal((await patch({ events: [] })).body.errors[0].path, '/events')
  assert.equal((await patch({ url: 'http://x.test' })).body.errors[0].path, '/url')
  const changed = await patch({ events: ['contact.created'], rate_limit: 5 })
  assert.deepEqual([changed.body.events, changed.body.rate_limit], [['contact.created'], 5])
  assert.equal(
    (await s.admin('POST', `/accounts/${a.id}/webhooks/${hook}/test`, { event: 'x' })).status,
    400,
  )
  assert.equal(
    (await s.admin('POST', `/accounts/${a.id}/webhooks/999999/test`, { event: 'contact.created' }))
      .status,
    404,
  )
})

test('test-send delivers the signed catalog example, logged like any delivery', async () => {
  const a = await s.account('Test send')
  const r = await receiver()
  const hook = await subscribe(a, r.url, ['customer.created'])
  const sent = await s.admin('POST', `/accounts/${a.id}/webhooks/${hook}/test`, {
    event: 'customer.score_changed',
  })
  assert.equal(sent.status, 202)
  await r.waitFor(1)
  const [payload] = checked(r, hook)
  const example = (await s.admin('GET', '/event-types')).body.find(
    (t: any) => t.name === 'customer.score_changed',
  )
  assert.deepEqual(payload.data, example.example.data)
  assert.match(r.requests[0].headers['x-service-hmac'] as string, /^sha256=[0-9a-f]{64}$/)
  const log = await eventually(async () => {
    const list = (await s.admin('GET', `/accounts/${a.id}/webhooks/${hook}/deliveries`)).body
    return list[0]?.status === 'delivered' && list
  }, 'delivered')
  assert.equal(log[0].id, sent.body.delivery_id)
})

test('a rate-limited endpoint gets its deliveries spaced, across the workers', async () => {
  const a = await s.account('Rate')
  const r = await receiver()
  const hook = await subscribe(a, r.url, ['customer.created'], { rate_limit: 4 })
  for (let i = 0; i < 8; i++)
    assert.equal(
      (
        await s.admin('POST', `/accounts/${a.id}/webhooks/${hook}/test`, {
          event: 'customer.created',
        })
      ).status,
      202,
    )
  await r.waitFor(8, 30_000)
  const arrived = r.requests.map((req) => req.arrived).sort((x, y) => x - y)
  // 8 deliveries at 4 per second take at least 7 quarter seconds (less a scheduling tolerance).
  assert.ok(arrived[7] - arrived[0] >= 1500, `${arrived[7] - arrived[0]} ms`)
  assert.equal(new Set(r.requests.map((req) => req.headers['webhook-id'])).size, 8)
})

test('segment.entered and segment.exited after the first computation, deleted customers included', async () => {
  const a = await scoredAccount(s, 'Segments')
  const r = await receiver()
  // engagement = -100 + 5 * logins: 20 logins or more is 0 or more.
  await uploadScored(a, 'customers', [
    { external_id: 'in', name: 'In', metrics: [{ date: '2026-11-01', logins: 30 }] },
    { external_id: 'out', name: 'Out', metrics: [{ date: '2026-11-01', logins: 5 }] },
  ])
  const created = await a.api('/api/v1/segments', {
    name: 'Engaged',
    filters: [{ propertyName: 'engagementscore', operator: 'GTE', value: '0' }],
  })
  assert.equal(created.status, 201, JSON.stringify(created.body))
  const id = created.body.id
  const computed = () =>
    eventually(
      async () => (await a.api(`/api/v1/segments/${id}`, undefined, 'GET')).body.computed_at,
      'computed',
    )
  await computed()
  const hook = await subscribe(a, r.url, ['segment.entered', 'segment.exited'])
  await uploadScored(a, 'customers', [
    { external_id: 'in', name: 'In', metrics: [{ date: '2026-11-02', logins: 1 }] },
    { external_id: 'out', name: 'Out', metrics: [{ date: '2026-11-02', logins: 35 }] },
  ])
  await r.waitFor(2)
  assert.equal((await a.api('/api/v1/customer/out', undefined, 'DELETE')).status, 204)
  await r.waitFor(3)
  await quiet(a)
  const got = checked(r, hook)
    .sort((x, y) => x.timestamp.localeCompare(y.timestamp) || x.event.localeCompare(y.event))
    .map((p) => [
      p.event,
      p.data.segment.name,
      p.data.customers.map((c: any) => [c.external_id, c.name]),
    ])
  assert.deepEqual(got, [
    ['segment.entered', 'Engaged', [['out', 'Out']]],
    ['segment.exited', 'Engaged', [['in', 'In']]],
    ['segment.exited', 'Engaged', [['out', null]]],
  ])
})
