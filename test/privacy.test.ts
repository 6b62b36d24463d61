import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { eventually, type Receiver, startReceiver } from './helpers/receiver.ts'
import { PURGE_BATCH } from '../src/db/purge.ts'
import { purgeExpired } from '../src/privacy/retention.ts'
import { waitingSql } from '../src/tracking/intake/cursor.ts'

// Issue 36: erasure, suppression, export and retention, on one service and two accounts that use
// the same external ids.
let s: TestService
let receiver: Receiver
after(async () => {
  await s.stop()
  await receiver.close()
})

type Account = Awaited<ReturnType<TestService['account']>>
const NOW = Date.now()
const DAY = 86_400_000

// The people: a contact of a customer that stays, and a customer erased with its contact.
const ANN = { id: 'ann-7f3k', name: 'Annabel Quuxley', email: 'annabel.quuxley@example.com' }
const GLOBEX = { id: 'cust-9zq', name: 'Globexo Zeta' }
const BOB = { id: 'bob-4hw', name: 'Robertino Plinth', email: 'robertino@plinth.example' }
const NEEDLES = [ANN.id, ANN.name, ANN.email, GLOBEX.id, GLOBEX.name, BOB.id, BOB.name, BOB.email]

const eraseKey = async (a: Account, scopes = ['erase']) => {
  const key = await s.admin('POST', `/accounts/${a.id}/keys`, { scopes })
  assert.equal(key.status, 201, JSON.stringify(key.body))
  return s.api(key.body.token)
}
const track = async (a: Account, events: unknown[]) => {
  const res = await a.api('/api/tracker/track', { trackerKey: a.trackerKey, events })
  assert.equal(res.status, 200, JSON.stringify(res.body))
}
// Segment messages (the HTTP Tracking API), with the key as Basic user name as the SDKs send it.
const segment = async (a: Account, batch: unknown[]) => {
  const basic = `Basic ${Buffer.from(`${a.token}:`).toString('base64')}`
  const res = await s.call('POST', '/v1/batch', { batch }, { authorization: basic })
  assert.equal(res.status, 200, JSON.stringify(res.body))
}
const applied = (accountId: number) =>
  eventually(
    async () =>
      (
        await s.sql`select (select count(*) from tracking_events where account_id = ${accountId}
          and status = 'received') + (select count(*)
            from (${waitingSql(s.sql, 'segment_messages', accountId)}) w)::int
          as n`
      )[0].n == 0 &&
      (
        await s.sql`select count(*)::int as n from graphile_worker.jobs
          where task_identifier = 'apply_events'`
      )[0].n === 0,
    'events applied',
  )
const event = (customer: string, contact: string | undefined, data: object = {}, at = NOW) => ({
  name: 'login',
  timestamp: at,
  identification: contact ? { customer, contact } : { customer },
  data,
})

// Fills an account with the people: records, metrics (snapshots, scores), tags, tracked events.
const fill = async (a: Account, names = true) => {
  await s.admin('POST', `/accounts/${a.id}/properties`, {
    entity: 'contact',
    kind: 'attribute',
    codename: 'email',
    type: 'string',
  })
  await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
  const day = new Date(NOW - DAY).toISOString().slice(0, 10)
  await uploadAndWait(a.api, 'customers', [
    { external_id: 'c1', name: 'Stays Inc', attributes: { country: 'US' } },
    {
      external_id: GLOBEX.id,
      name: names ? GLOBEX.name : 'Other Globex',
      attributes: { country: 'DE' },
      metrics: [{ date: day, logins: 7 }],
    },
  ])
  await uploadAndWait(a.api, 'contacts', [
    { customer_external_id: 'c1', contact_external_id: 'carl', contact_name: 'Carl Stays' },
    {
      customer_external_id: 'c1',
      contact_external_id: ANN.id,
      contact_name: names ? ANN.name : 'Other Ann',
      attributes: { email: names ? ANN.email : 'other@example.org' },
      metrics: [{ date: day, sessions: 3 }],
    },
    {
      customer_external_id: GLOBEX.id,
      contact_external_id: BOB.id,
      contact_name: names ? BOB.name : 'Other Bob',
      attributes: { email: names ? BOB.email : 'other-bob@example.org' },
    },
  ])
  await track(a, [
    event('c1', ANN.id, { contact: { email: names ? ANN.email : 'other@example.org' } }),
    event('c1', 'carl'),
    event(GLOBEX.id, BOB.id, { contact: { contact_name: names ? BOB.name : 'Other Bob' } }),
    ...Array.from({ length: 20 }, (_, i) => event(GLOBEX.id, undefined, {}, NOW - i * 1000)),
  ])
  // The same people through Segment: an identify with the email as a trait, and a track.
  await segment(a, [
    {
      type: 'identify',
      messageId: `m1-${a.id}`,
      userId: BOB.id,
      traits: { email: names ? BOB.email : 'x@y.org' },
    },
    {
      type: 'track',
      messageId: `m2-${a.id}`,
      userId: ANN.id,
      event: 'login',
      context: { groupId: 'c1' },
    },
  ])
  await applied(a.id)
}

let a: Account
let b: Account
let hookId: number
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000, trackRateLimit: 100_000 })
  // The receiver answers with what it got, so that the attempts' answer excerpts hold
  // the person too.
  receiver = await startReceiver((r) => ({ status: 200, body: r.raw.toString('utf8') }))
  a = await scoredAccount(s, 'Acme')
  b = await scoredAccount(s, 'Other')
  const hook = await s.admin('POST', `/accounts/${a.id}/webhooks`, {
    url: receiver.url,
    events: ['customer.created', 'contact.created'],
  })
  assert.equal(hook.status, 201, JSON.stringify(hook.body))
  hookId = hook.body.id
  await s.admin('POST', `/accounts/${a.id}/tags`, { title: 'VIP' })
  await fill(a)
  await fill(b, false)
  for (const [entity, id] of [
    ['contacts', ANN.id],
    ['customers', GLOBEX.id],
  ]) {
    const tagged = await s.admin('PUT', `/accounts/${a.id}/${entity}/${id}/tags`, {
      titles: ['VIP'],
    })
    assert.equal(tagged.status, 200, JSON.stringify(tagged.body))
  }
  const segment = await a.api('/api/v1/segments', {
    name: 'Germany',
    filters: [{ propertyName: 'country', operator: 'EQ', value: 'DE' }],
  })
  assert.equal(segment.status, 201, JSON.stringify(segment.body))
  await eventually(
    async () =>
      (await s.sql`select count(*)::int as n from segment_members where account_id = ${a.id}`)[0]
        .n > 0,
    'segment members',
  )
  await eventually(
    async () =>
      (
        await s.sql`select count(*)::int as n from webhook_deliveries where account_id = ${a.id}
        and status = 'delivered'`
      )[0].n >= 2,
    'deliveries',
  )
})

test('a key gets the erase scope only when it asks for it', async () => {
  const keys = await s.admin('GET', `/accounts/${a.id}/keys`)
  assert.deepEqual(keys.body[0].scopes, ['search', 'upload', 'track'])
  const refused = await a.api('/api/v1/erasures', { customers: ['nobody'] })
  assert.equal(refused.status, 403, JSON.stringify(refused.body))
  const searchOnly = await eraseKey(a, ['search'])
  assert.equal((await searchOnly('/api/v1/suppressions', undefined, 'GET')).status, 403)
  const eraser = await eraseKey(a)
  assert.equal((await eraser('/api/v1/suppressions', undefined, 'GET')).status, 200)
})

test('erasure requests are checked: at most 1000 of each, no unknown keys; an empty one erases nobody', async () => {
  const eraser = await eraseKey(a)
  for (const [body, path] of [
    [{ customers: Array.from({ length: 1001 }, (_, i) => `c${i}`) }, '/customers'],
    [{ contacts: [{ customer_external_id: 'c1' }] }, '/contacts/0/contact_external_id'],
    [{ customers: [''] }, '/customers/0'],
    [{ custmers: ['c1'] }, '/custmers'],
  ] as const) {
    const res = await eraser('/api/v1/erasures', body)
    assert.equal(res.status, 400, JSON.stringify(res.body))
    assert.ok(
      res.body.errors.some((e: { path: string }) => e.path === path),
      `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body.errors)}`,
    )
  }
  const empty = await eraser('/api/v1/erasures', {})
  assert.equal(empty.status, 202, JSON.stringify(empty.body))
  const done = await erased(eraser, empty.body.id)
  assert.deepEqual(
    [done.status, done.requested, done.counts.suppressions],
    ['done', { contacts: 0, customers: 0 }, 0],
  )
  assert.equal((await eraser('/api/v1/erasures/999999', undefined, 'GET')).status, 404)
  assert.equal((await eraser('/api/v1/erasures/x', undefined, 'GET')).status, 404)
})

test('the export holds what was uploaded and tracked, for a contact and for a customer with its contacts', async () => {
  const contact = await a.api(`/api/v1/customer/c1/contact/${ANN.id}/export`, undefined, 'GET')
  assert.equal(contact.status, 200, JSON.stringify(contact.body))
  assert.equal(contact.headers.get('content-type'), 'application/json')
  assert.equal(contact.body.contact.record.name, ANN.name)
  assert.equal(contact.body.contact.record.attributes.email, ANN.email)
  assert.deepEqual(contact.body.contact.tags, ['VIP'])
  assert.equal(contact.body.contact.snapshots.length, 1)
  assert.equal(contact.body.contact.snapshots[0].values.sessions, 3)
  assert.ok(contact.body.contact.scores, 'scores')
  // The tracker's event and the Segment track.
  assert.equal(contact.body.events.length, 2)
  const tracked = contact.body.events.find((e: any) => e.data.contact)
  assert.equal(tracked.data.contact.email, ANN.email)
  assert.ok(contact.body.events.every((e: any) => e.identification.contact === ANN.id))

  const customer = await a.api(`/api/v1/customer/${GLOBEX.id}/export`, undefined, 'GET')
  assert.equal(customer.status, 200, JSON.stringify(customer.body))
  assert.equal(customer.headers.get('transfer-encoding'), 'chunked')
  assert.equal(customer.body.customer.record.name, GLOBEX.name)
  assert.deepEqual(customer.body.customer.tags, ['VIP'])
  assert.equal(customer.body.customer.snapshots[0].values.logins, 7)
  assert.equal(customer.body.events.length, 21)
  assert.deepEqual(
    customer.body.contacts.map((c: any) => [
      c.record.external_id,
      c.record.name,
      c.record.attributes.email,
    ]),
    [[BOB.id, BOB.name, BOB.email]],
  )
  // The Segment identify of its contact, as held (the track naming its customer is an event above).
  const identify = (id: number, email: string) => [
    {
      message_id: `m1-${id}`,
      type: 'identify',
      user_id: BOB.id,
      traits: { email },
      status: 'applied',
    },
  ]
  const held = (doc: any) =>
    doc.segment_messages.map((m: any) => ({
      message_id: m.message_id,
      type: m.type,
      user_id: m.user_id,
      traits: m.traits,
      status: m.status,
    }))
  assert.deepEqual(held(customer.body), identify(a.id, BOB.email))
  assert.deepEqual(held(contact.body), [])
  const bob = await a.api(
    `/api/v1/customer/${GLOBEX.id}/contact/${BOB.id}/export`,
    undefined,
    'GET',
  )
  assert.deepEqual(held(bob.body), identify(a.id, BOB.email))
  const otherBob = await b.api(
    `/api/v1/customer/${GLOBEX.id}/contact/${BOB.id}/export`,
    undefined,
    'GET',
  )
  assert.deepEqual(held(otherBob.body), identify(b.id, 'x@y.org'))

  // Another account's record of the same ids is its own; unknown ones are 404 before any byte.
  const other = await b.api(`/api/v1/customer/c1/contact/${ANN.id}/export`, undefined, 'GET')
  assert.equal(other.body.contact.record.name, 'Other Ann')
  assert.equal(
    (await a.api(`/api/v1/customer/${GLOBEX.id}/contact/${ANN.id}/export`, undefined, 'GET'))
      .status,
    404,
  )
  assert.equal((await a.api('/api/v1/customer/nobody/export', undefined, 'GET')).status, 404)
  const eraser = await eraseKey(a)
  assert.equal((await eraser(`/api/v1/customer/${GLOBEX.id}/export`, undefined, 'GET')).status, 403)
})

// Every row of every table, as text, that holds one of the needles. Rows of another account (the
// same external ids, other names) are left out where the table has an account_id.
const findEverywhere = async (accountId: number, needles: string[]) => {
  const tables = await s.sql`
    select c.oid::regclass::text as name,
      exists (select 1 from pg_attribute t where t.attrelid = c.oid and t.attname = 'account_id'
        and not t.attisdropped) as scoped
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p') and n.nspname in ('public', 'graphile_worker')`
  assert.ok(tables.length > 30, `only ${tables.length} tables`)
  const found: string[] = []
  for (const { name, scoped } of tables) {
    for (const needle of needles) {
      const pattern = `%${needle.replace(/[\\%_]/g, '\\$&')}%`
      const [{ n }] = await s.sql.unsafe(
        `select count(*)::int as n from ${name} t where t::text like $1 ${scoped ? 'and t.account_id = $2' : ''}`,
        scoped ? [pattern, accountId] : [pattern],
      )
      if (n > 0) found.push(`${name}: ${needle} (${n})`)
    }
  }
  return found
}

const erased = async (api: ReturnType<TestService['api']>, id: number) =>
  eventually(async () => {
    const res = await api(`/api/v1/erasures/${id}`, undefined, 'GET')
    assert.equal(res.status, 200, JSON.stringify(res.body))
    return res.body.status !== 'pending' && res.body
  }, `erasure ${id}`)

let counts: Record<string, number>
test('erasing a contact and a customer leaves nothing of them anywhere; the other account keeps its own', async () => {
  assert.ok((await findEverywhere(a.id, NEEDLES)).length > 10, 'the people are there before')
  const otherBefore =
    await s.sql`select count(*)::int as n from tracking_events where account_id = ${b.id}`
  const eraser = await eraseKey(a)
  const res = await eraser('/api/v1/erasures', {
    contacts: [{ customer_external_id: 'c1', contact_external_id: ANN.id }],
    customers: [GLOBEX.id],
  })
  assert.equal(res.status, 202, JSON.stringify(res.body))
  assert.equal(res.body.status, 'pending')
  const done = await erased(eraser, res.body.id)
  assert.equal(done.status, 'done', JSON.stringify(done))
  assert.ok(done.finished_at)
  assert.deepEqual(done.requested, { contacts: 1, customers: 1 })
  counts = done.counts
  assert.equal(counts.customers, 1)
  assert.equal(counts.contacts, 2)
  assert.equal(counts.tracking_events, 23)
  // The identify; the track names its customer, so it was kept as a tracked event
  // (src/tracking/relay.ts).
  assert.equal(counts.segment_messages, 1)
  assert.equal(counts.contact_tags, 1)
  assert.equal(counts.customer_tags, 1)
  assert.ok(counts.customer_snapshots >= 1 && counts.contact_snapshots >= 1, JSON.stringify(counts))
  assert.ok(counts.segment_memberships >= 1, JSON.stringify(counts))
  assert.ok(counts.webhook_deliveries >= 1, JSON.stringify(counts))
  assert.equal(counts.suppressions, 3)
  assert.equal(counts.customers_rescored, 1)

  assert.deepEqual(await findEverywhere(a.id, NEEDLES), [])

  // Redacted deliveries keep their status and timing; what stays of the erasure is counts.
  const deliveries = await s.admin('GET', `/accounts/${a.id}/webhooks/${hookId}/deliveries`)
  assert.ok(
    deliveries.body.every((d: any) => d.status === 'delivered' && d.attempts[0].duration_ms >= 0),
  )
  const [log] =
    await s.sql`select * from erasures where account_id = ${a.id} and id = ${res.body.id}`
  assert.ok(log.key_id > 0)
  // The remaining contact and customer are there; the other account's same ids are untouched.
  assert.equal((await a.api('/api/v1/customer/c1/contact/carl', undefined, 'GET')).status, 200)
  assert.equal(
    (await b.api(`/api/v1/customer/c1/contact/${ANN.id}`, undefined, 'GET')).body.name,
    'Other Ann',
  )
  assert.equal((await b.api(`/api/v1/customer/${GLOBEX.id}`, undefined, 'GET')).status, 200)
  const otherAfter =
    await s.sql`select count(*)::int as n from tracking_events where account_id = ${b.id}`
  assert.deepEqual(otherAfter, otherBefore)
})

test('a tracked event for an erased contact is dropped and counted, until the suppression is lifted', async () => {
  const eraser = await eraseKey(a)
  await track(a, [
    event('c1', ANN.id, { contact: { email: ANN.email, contact_name: ANN.name } }),
    event(GLOBEX.id, undefined),
  ])
  // Segment messages naming them are dropped too, and keep nothing of them.
  await segment(a, [
    {
      type: 'identify',
      messageId: 'm3',
      userId: ANN.id,
      traits: { name: ANN.name, email: ANN.email },
    },
    {
      type: 'group',
      messageId: 'm4',
      userId: BOB.id,
      groupId: GLOBEX.id,
      traits: { name: GLOBEX.name },
    },
    { type: 'track', messageId: 'm5', userId: ANN.id, event: 'login', context: { groupId: 'c1' } },
  ])
  await applied(a.id)
  assert.equal((await a.api(`/api/v1/customer/c1/contact/${ANN.id}`, undefined, 'GET')).status, 404)
  assert.equal((await a.api(`/api/v1/customer/${GLOBEX.id}`, undefined, 'GET')).status, 404)
  const ingest = await a.api('/api/v1/ingest/status', undefined, 'GET')
  assert.equal(ingest.body.by_reason.suppressed, 3, JSON.stringify(ingest.body))
  assert.deepEqual(await findEverywhere(a.id, NEEDLES), [])
  const list = await eraser('/api/v1/suppressions', undefined, 'GET')
  assert.equal(list.status, 200)
  assert.equal(list.body.length, 3)
  assert.equal(JSON.stringify(list.body).includes(ANN.id), false)
  assert.equal(
    list.body.map((x: any) => x.dropped).reduce((x: number, y: number) => x + y),
    6,
  )

  // The other account's identical contact is tracked as always.
  await track(b, [event('c1', ANN.id, { contact: { email: 'new@example.org' } })])
  await applied(b.id)
  const other = await b.api(`/api/v1/customer/c1/contact/${ANN.id}`, undefined, 'GET')
  assert.equal(
    JSON.stringify(other.body).includes('new@example.org'),
    true,
    JSON.stringify(other.body),
  )

  assert.equal(
    (await eraser(`/api/v1/suppressions/contact/${ANN.id}`, undefined, 'DELETE')).status,
    204,
  )
  assert.equal(
    (await eraser(`/api/v1/suppressions/contact/${ANN.id}`, undefined, 'DELETE')).status,
    404,
  )
  assert.equal((await eraser('/api/v1/suppressions/person/x', undefined, 'DELETE')).status, 404)
  await track(a, [event('c1', ANN.id, { contact: { contact_name: 'Ann Again' } })])
  await applied(a.id)
  const back = await a.api(`/api/v1/customer/c1/contact/${ANN.id}`, undefined, 'GET')
  assert.equal(back.status, 200)
  assert.equal(back.body.name, 'Ann Again')
})

test('uploads are not suppressed: the customer uploaded again is back', async () => {
  await uploadAndWait(a.api, 'customers', [{ external_id: GLOBEX.id, name: 'Globex Again' }])
  assert.equal(
    (await a.api(`/api/v1/customer/${GLOBEX.id}`, undefined, 'GET')).body.name,
    'Globex Again',
  )
})

test('the admin API runs the same erasure; the log names no key then', async () => {
  const res = await s.admin('POST', `/accounts/${a.id}/erasures`, { customers: [GLOBEX.id] })
  assert.equal(res.status, 202, JSON.stringify(res.body))
  const done = await eventually(async () => {
    const got = await s.admin('GET', `/accounts/${a.id}/erasures/${res.body.id}`)
    return got.body.status === 'done' && got.body
  }, 'admin erasure')
  assert.equal(done.key_id, null)
  assert.equal(done.counts.customers, 1)
  assert.equal((await a.api(`/api/v1/customer/${GLOBEX.id}`, undefined, 'GET')).status, 404)
  // Another account's erasure is not found by id.
  const otherEraser = await eraseKey(b)
  assert.equal((await otherEraser(`/api/v1/erasures/${res.body.id}`, undefined, 'GET')).status, 404)
  assert.equal(
    (await s.admin('POST', '/accounts/999999/erasures', { customers: ['x'] })).status,
    404,
  )
})

test('retention purges only what is past its age, and /metrics shows it', async () => {
  await track(b, [event('c1', 'carl'), event('c1', 'carl')])
  await applied(b.id)
  const events = await s.sql`select id from tracking_events where account_id = ${b.id} order by id`
  const old = events.slice(0, 3).map((e) => e.id)
  await s.sql`update tracking_events set received_at = now() - interval '401 days'
    where account_id = ${b.id} and id = any(${old})`
  const [young] = events.slice(-1)
  // An old event time does not count: it is how long the service has held the event.
  await s.sql`update tracking_events set occurred_at = now() - interval '900 days'
    where account_id = ${b.id} and id = ${young.id}`
  await uploadAndWait(a.api, 'customers', [{ external_id: 'r1', name: 'R1' }])
  await uploadAndWait(a.api, 'customers', [{ external_id: 'r2', name: 'R2' }])
  const deliveries = await eventually(async () => {
    const rows = await s.sql`select id from webhook_deliveries where account_id = ${a.id}
        and payload is not null
      and status = 'delivered' order by id`
    return rows.length === 2 && rows
  }, 'two deliveries')
  await s.sql`update webhook_deliveries set created_at = now() - interval '31 days'
    where account_id = ${a.id} and id = ${deliveries[0].id}`
  await s.sql`update webhook_deliveries set created_at = now() - interval '31 days',
    status = 'pending'
    where account_id = ${a.id} and id = ${deliveries[1].id}`

  const result = await purgeExpired(s.app)
  assert.deepEqual(result, { events: 3, deliveries: 1 })
  const left = await s.sql`select id from tracking_events where account_id = ${b.id} order by id`
  assert.deepEqual(
    left.map((e) => e.id),
    events.slice(3).map((e) => e.id),
  )
  const kept = await s.sql`select id, payload is null as purged, status from webhook_deliveries
    where account_id = ${a.id} and id = any(${[deliveries[0].id, deliveries[1].id]}) order by id`
  assert.deepEqual(
    kept.map((d) => [d.purged, d.status]),
    [
      [true, 'delivered'],
      [false, 'pending'],
    ],
  )
  const [excerpt] = await s.sql`select count(*)::int as n from webhook_attempts
    where account_id = ${a.id} and delivery_id = ${deliveries[0].id}
      and response_excerpt is not null`
  assert.equal(excerpt.n, 0)
  // A second run finds nothing more.
  assert.deepEqual(await purgeExpired(s.app), { events: 0, deliveries: 0 })

  const metrics = (await s.call('GET', '/metrics')).body as string
  assert.match(metrics, /service_retention_purged_rows\{kind="events"\} 3/)
  assert.match(metrics, /service_retention_purged_rows\{kind="deliveries"\} 1/)
  const oldest = Number(
    /service_retention_oldest_kept_timestamp_seconds\{kind="events"\} (\S+)/.exec(metrics)?.[1],
  )
  assert.ok(oldest > (Date.now() - 400 * DAY) / 1000 && oldest <= Date.now() / 1000, String(oldest))
})

// Deliveries made with SQL go to this one: inactive, it sends none of them.
const inactiveWebhook = async (accountId: number) =>
  (
    await s.sql`insert into webhooks (account_id, url, events, secret, active)
      values (${accountId}, 'http://127.0.0.1:9/', '{}', 'unused', false) returning id`
  )[0].id as number

test('retention walks past its first batch: every expired row of a long backlog goes, the young stay', async () => {
  const c = await s.account('Backlog')
  const batches = PURGE_BATCH * 2 + 1
  await s.sql`insert into tracking_events (account_id, name, occurred_at, customer_external_id,
    status, received_at)
    select ${c.id}, 'old', now(), 'bulk', 'applied', now() - interval '401 days'
      from generate_series(1, ${batches})`
  await s.sql`insert into tracking_events (account_id, name, occurred_at, customer_external_id,
    status)
    select ${c.id}, 'young', now(), 'bulk', 'applied' from generate_series(1, 2)`
  const webhook = await inactiveWebhook(c.id)
  await s.sql`insert into webhook_deliveries (account_id, webhook_id, event, message_id, payload,
    status, created_at)
    select ${c.id}, ${webhook}, 'bulk', 'bulk-' || g, '{}', 'delivered', now() - interval '31 days'
    from generate_series(1, ${PURGE_BATCH + 1}) g`
  await s.sql`insert into webhook_deliveries (account_id, webhook_id, event, message_id, payload,
    status)
    values (${c.id}, ${webhook}, 'bulk', 'bulk-young', '{}', 'delivered')`
  assert.deepEqual(await purgeExpired(s.app), { events: batches, deliveries: PURGE_BATCH + 1 })
  const left =
    await s.sql`select name, count(*)::int as n from tracking_events where account_id = ${c.id}
    group by name`
  assert.deepEqual([...left], [{ name: 'young', n: 2 }])
  const held = await s.sql`select message_id from webhook_deliveries where account_id = ${c.id}
    and payload is not null`
  assert.deepEqual([...held], [{ message_id: 'bulk-young' }])
})

test('an erasure fails a pending delivery that names the person (unsendable without its payload)', async () => {
  const c = await s.account('Pending delivery')
  const webhook = await inactiveWebhook(c.id)
  const deliveries =
    await s.sql`insert into webhook_deliveries (account_id, webhook_id, event, message_id, payload)
    values (${c.id}, ${webhook}, 'customer.created', 'names-gone', '{"external_id": "gone-1"}'),
      (${c.id}, ${webhook}, 'customer.created', 'names-kept', '{"external_id": "kept-1"}')
    returning id`
  await s.sql`insert into webhook_attempts (account_id, delivery_id, attempt, status_code,
    duration_ms,
      response_excerpt)
    select ${c.id}, id, 1, 500, 5, 'busy' from webhook_deliveries where account_id = ${c.id}`
  const res = await s.admin('POST', `/accounts/${c.id}/erasures`, { customers: ['gone-1'] })
  assert.equal(res.status, 202, JSON.stringify(res.body))
  const done = await eventually(async () => {
    const got = await s.admin('GET', `/accounts/${c.id}/erasures/${res.body.id}`)
    return got.body.status === 'done' && got.body
  }, 'erasure')
  assert.equal(done.counts.webhook_deliveries, 1)
  const rows = await s.sql`select d.message_id, d.status, d.payload, a.response_excerpt
      from webhook_deliveries d
    join webhook_attempts a on a.account_id = d.account_id and a.delivery_id = d.id
    where d.account_id = ${c.id} and d.id = any(${deliveries.map((d) => d.id)})
      order by d.message_id`
  assert.deepEqual(
    rows.map((r) => [r.message_id, r.status, r.payload, r.response_excerpt]),
    [
      ['names-gone', 'failed', null, null],
      ['names-kept', 'pending', '{"external_id": "kept-1"}', 'busy'],
    ],
  )
})

test('an erasure whose every attempt fails is marked failed, forgets whom it named; the queue goes on', async () => {
  await uploadAndWait(a.api, 'customers', [{ external_id: 'doomed', name: 'Doomed Co' }])
  // The database refuses to delete this one customer, as a damaged table would: every attempt
  // throws. Citus runs a trigger of a distributed table on the shard's node, and creates one
  // only when told that this is meant (citus.enable_unsafe_triggers; a mere placeholder on
  // a plain PostgreSQL).
  await s.sql`create function refuse_doomed() returns trigger language plpgsql as $$ begin
      raise exception 'simulated failure deleting %', old.external_id; end $$`
  await s.sql.begin(async (tx) => {
    await tx`set local citus.enable_unsafe_triggers = on`
    await tx`create trigger refuse_doomed before delete on customers for each row
      when (old.external_id = 'doomed') execute function refuse_doomed()`
  })
  const eraser = await eraseKey(a)
  try {
    const res = await eraser('/api/v1/erasures', { customers: ['doomed'] })
    assert.equal(res.status, 202, JSON.stringify(res.body))
    const job = () => s.sql`select j.attempts, j.max_attempts, j.last_error
        from graphile_worker._private_jobs j
      join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = 'erase' and j.payload->>'erasure_id' = ${String(res.body.id)}`
    // The retries' backoff (seconds, then minutes) is brought forward, so the five
    // attempts run now.
    const failed = await eventually(async () => {
      await s.sql`update graphile_worker._private_jobs j set run_at = now()
        from graphile_worker._private_tasks t
        where t.id = j.task_id and t.identifier = 'erase'
          and j.payload->>'erasure_id' = ${String(res.body.id)}
          and j.locked_at is null and j.run_at > now()`
      const got = await eraser(`/api/v1/erasures/${res.body.id}`, undefined, 'GET')
      return got.body.status !== 'pending' && got.body
    }, 'the erasure to fail')
    assert.equal(failed.status, 'failed', JSON.stringify(failed))
    assert.ok(failed.finished_at)
    assert.deepEqual([failed.requested, failed.counts], [{ contacts: 0, customers: 1 }, {}])
    const [{ attempts, max_attempts, last_error }] = await job()
    assert.equal(attempts, max_attempts)
    assert.match(last_error, /simulated failure deleting doomed/)
    // Nothing was half erased (each attempt rolled back), and the targets that name the
    // person are gone.
    assert.equal((await a.api('/api/v1/customer/doomed', undefined, 'GET')).status, 200)
    const [targets] = await s.sql`select count(*)::int as n from erasure_targets
      where account_id = ${a.id} and erasure_id = ${res.body.id}`
    assert.equal(targets.n, 0)
  } finally {
    await s.sql.begin(async (tx) => {
      await tx`set local citus.enable_unsafe_triggers = on`
      await tx`drop trigger if exists refuse_doomed on customers`
    })
    await s.sql`drop function if exists refuse_doomed()`
  }
  // The account's queue is not held by the failed job: asked again, once the cause is
  // gone, it is done.
  const again = await eraser('/api/v1/erasures', { customers: ['doomed'] })
  const done = await erased(eraser, again.body.id)
  assert.deepEqual([done.status, done.counts.customers], ['done', 1])
  assert.equal((await a.api('/api/v1/customer/doomed', undefined, 'GET')).status, 404)
})

test('a client that drops a streamed export midway ends its transaction and frees its connection', async () => {
  // Megabytes of events, more than the loopback socket buffers hold, so the export waits
  // on its reader.
  await s.sql`insert into tracking_events (account_id, name, occurred_at, customer_external_id,
    data, status)
    select ${a.id}, 'login', now(), 'c1', jsonb_build_object('pad', repeat('x', 6000)), 'applied'
    from generate_series(1, 2000)`
  // The export's connection, between two fetches of its cursor (a portal without a Sync: 'active').
  const exporting = async () =>
    (
      await s.sql`select count(*)::int as n from pg_stat_activity where datname = current_database()
        and pid <> pg_backend_pid() and state <> 'idle' and query like '%json_strip_nulls%'`
    )[0].n
  // More drops than the pool has connections (20, src/service.ts): a leaked one each would leave
  // the last exports waiting for a connection.
  for (let i = 0; i < 21; i++) {
    const req = request(`${s.base}/api/v1/customer/c1/export`, {
      headers: { 'service-key': a.token },
      signal: AbortSignal.timeout(10_000),
    })
    try {
      const first = await new Promise<number>((resolve, reject) => {
        req.on('response', (res) =>
          res.once('data', (chunk: Buffer) => {
            res.pause()
            resolve(chunk.length)
          }),
        )
        req.on('error', reject)
        req.end()
      })
      assert.ok(first > 0)
      await eventually(async () => (await exporting()) === 1, 'the export waiting on its reader')
    } finally {
      req.destroy()
    }
    await eventually(async () => (await exporting()) === 0, 'the export to end its transaction')
  }
  const whole = await a.api('/api/v1/customer/c1/export', undefined, 'GET')
  assert.equal(whole.status, 200)
  assert.ok(whole.body.events.length > 2000, String(whole.body.events.length))
  assert.equal((await a.api('/api/v1/customer/c1', undefined, 'GET')).status, 200)
})
