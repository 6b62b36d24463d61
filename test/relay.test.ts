// The Segment HTTP Tracking API (issue 33): the real SDKs, unmodified, pointed at the running
// service, then the public API; and the semantics Segment's users rely on, over raw HTTP.
import assert from 'node:assert/strict'
import { gzipSync } from 'node:zlib'
import { after, before, test } from 'node:test'
import { Analytics } from '@segment/analytics-node'
import RudderAnalytics from '@rudderstack/rudder-sdk-node'
import { drainEvents } from '../src/tracking/apply.ts'
import { countAccountEvents } from '../src/tracking/tracker/counts.ts'
import { waitingSql } from '../src/tracking/intake/cursor.ts'
import {
  KEEP_DAYS,
  MAX_KEY_NAMES,
  MESSAGES_PER_BATCH,
  PENDING_HOURS,
  PENDING_MAX,
} from '../src/tracking/relay/apply.ts'
import { BATCHES_PER_JOB } from '../src/tracking/intake/batches.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { hostileRecords } from './helpers/hostile.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService({ trackRateLimit: 100_000, logLevel: 'error' })
})
after(() => s.stop())

type Account = Awaited<ReturnType<typeof scoredAccount>>
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const basic = (token: string) => `Basic ${Buffer.from(`${token}:`).toString('base64')}`
const post = (a: Account, path: string, body: unknown, headers: Record<string, string> = {}) =>
  s.call('POST', path, body, { authorization: basic(a.token), ...headers })
const status = async (a: Account) => {
  const res = await a.api('/api/v1/ingest/status', undefined, 'GET')
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}

// Applied: no message of the account waits for the Segment apply job, and no tracked event for the
// tracker's.
const settled = async (accountId: number, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const [{ n }] = await s.sql`
      select (select count(*) from (${waitingSql(s.sql, 'segment_messages', accountId)}) w)
        + (select count(*) from tracking_events where account_id = ${accountId}
          and status = 'received') as n`
    if (Number(n) === 0) return
    if (Date.now() > deadline)
      throw new Error(`account ${accountId}: ${n} messages or events not applied`)
    await sleep(50)
  }
}

// What every SDK test checks through the public API: the customer and contact with their traits as
// attributes, the events in the customer's events, and after the daily aggregation the counts as
// metrics that scoring reads (logins is the customer model's engagement metric).
const checkPublicApi = async (a: Account, customer: string, contact: string, logins: number) => {
  await settled(a.id)
  const c = await a.api(`/api/v1/customer/${customer}`, undefined, 'GET')
  assert.equal(c.status, 200, JSON.stringify(c.body))
  assert.equal(c.body.name, 'Acme Inc')
  assert.deepEqual(c.body.properties, { country: 'DE', has_sso: true })
  const p = await a.api(`/api/v1/customer/${customer}/contact/${contact}`, undefined, 'GET')
  assert.equal(p.status, 200, JSON.stringify(p.body))
  assert.equal(p.body.name, 'Pat Doe')
  assert.deepEqual(p.body.properties, { role: 'admin' })
  const events = await a.api(`/api/v1/customer/${customer}/events`, undefined, 'GET')
  assert.equal(events.status, 200)
  assert.equal(events.body.by_status.applied, logins, JSON.stringify(events.body))
  assert.ok(
    events.body.events.every(
      (e: any) => e.name === 'logins' && e.identification.contact === contact,
    ),
  )
  assert.deepEqual(events.body.events[0].data, { properties: { plan: 'pro' } })
  await countAccountEvents(s.sql, a.id)
  const deadline = Date.now() + 30_000
  for (;;) {
    const scored = await a.api(`/api/v1/customer/${customer}`, undefined, 'GET')
    if (scored.body.properties.logins === logins && scored.body.engagementscore !== null) {
      // -100 + 200 * logins / 40 on the model's 0..40 scale.
      assert.equal(scored.body.engagementscore, Math.round(-100 + (200 * logins) / 40))
      return
    }
    assert.ok(Date.now() < deadline, `not scored: ${JSON.stringify(scored.body)}`)
    await sleep(100)
  }
}

test('@segment/analytics-node: group, identify and track become a customer, a contact and counted events', async () => {
  const a = await scoredAccount(s, 'Segment SDK')
  const analytics = new Analytics({
    writeKey: a.token,
    host: s.base,
    flushAt: 50,
    flushInterval: 50,
    maxRetries: 0,
  })
  const failures: unknown[] = []
  analytics.on('error', (err) => failures.push(err))
  analytics.group({
    userId: 'pat',
    groupId: 'acme',
    traits: { name: 'Acme Inc', country: 'DE', has_sso: true },
  })
  analytics.identify({
    userId: 'pat',
    traits: { name: 'Pat Doe', role: 'admin', email: 'pat@acme.test' },
  })
  for (let i = 0; i < 3; i++)
    analytics.track({ userId: 'pat', event: 'logins', properties: { plan: 'pro' } })
  await analytics.closeAndFlush()
  assert.deepEqual(failures, [])
  await checkPublicApi(a, 'acme', 'pat', 3)
  const st = await status(a)
  assert.deepEqual(st.by_type, { group: 1, identify: 1, track: 3 })
  assert.deepEqual(st.dropped_key_names, [
    { entity: 'contact', key: 'email', count: 1, did_you_mean: null },
  ])
})

test('@rudderstack/rudder-sdk-node (gzip): group, identify and track likewise', async () => {
  const a = await scoredAccount(s, 'Rudder SDK')
  const client = new RudderAnalytics(a.token, {
    dataPlaneUrl: s.base,
    flushAt: 50,
    flushInterval: 50,
    logLevel: 'error',
  })
  const sent = (call: (done: (err?: Error) => void) => void) =>
    new Promise<void>((resolve, reject) => call((err) => (err ? reject(err) : resolve())))
  await Promise.all([
    sent((done) =>
      client.group(
        {
          userId: 'sam',
          groupId: 'acme-r',
          traits: { name: 'Acme Inc', country: 'DE', has_sso: true },
        },
        done,
      ),
    ),
    sent((done) =>
      client.identify({ userId: 'sam', traits: { name: 'Pat Doe', role: 'admin' } }, done),
    ),
    sent((done) =>
      client.track({ userId: 'sam', event: 'logins', properties: { plan: 'pro' } }, done),
    ),
    sent((done) =>
      client.track({ userId: 'sam', event: 'logins', properties: { plan: 'pro' } }, done),
    ),
  ])
  await client.flush()
  await checkPublicApi(a, 'acme-r', 'sam', 2)
})

test('messageId deduplicates in a batch and across batches: a message for KEEP_DAYS, a track while kept', async () => {
  const a = await scoredAccount(s, 'Dedup')
  const group = { type: 'group', messageId: 'g1', groupId: 'd1', traits: { name: 'D' } }
  const track = (id: string) => ({
    type: 'track',
    messageId: id,
    userId: 'u1',
    event: 'logins',
    context: { groupId: 'd1' },
  })
  for (const batch of [
    [group, track('t1'), track('t1')],
    [track('t1'), track('t2')],
  ]) {
    const res = await post(a, '/v1/batch', { batch })
    assert.deepEqual([res.status, res.body], [200, { success: true }])
  }
  assert.equal((await post(a, '/v1/track', track('t2'))).status, 200)
  await settled(a.id)
  const events = await a.api('/api/v1/customer/d1/events', undefined, 'GET')
  assert.equal(events.body.count, 2)
  assert.deepEqual((await status(a)).by_type, { group: 1, track: 2 })
  // A messageId is one message whichever table keeps it: a track stored as an event and a message
  // kept for the Segment apply job deduplicate each other.
  assert.equal((await post(a, '/v1/page', { messageId: 't1', userId: 'u1' })).status, 200)
  assert.equal((await post(a, '/v1/page', { messageId: 'p0', userId: 'u1' })).status, 200)
  assert.equal((await post(a, '/v1/track', track('p0'))).status, 200)
  // The same track sent at once by many requests (an SDK's retries) is stored once,
  // and never a 5xx.
  const retries = await Promise.all(
    Array.from({ length: 8 }, () => post(a, '/v1/track', track('t3'))),
  )
  assert.deepEqual(
    retries.map((r) => r.status),
    Array(8).fill(200),
  )
  await settled(a.id)
  assert.equal((await a.api('/api/v1/customer/d1/events', undefined, 'GET')).body.count, 3)
  assert.deepEqual((await status(a)).by_type, { group: 1, page: 1, track: 3 })
  const metrics = (await s.call('GET', '/metrics')).body as string
  // 3 above, the page 't1', the track 'p0' and 7 of the 8 retries (the service's
  // counter: at least).
  const duplicates = /service_segment_messages_received_total\{type="duplicate"\} (\d+)/.exec(
    metrics,
  )?.[1]
  assert.ok(Number(duplicates) >= 12, `duplicates counted: ${duplicates}`)
  // Past the window the messages done are forgotten (at the account's next apply), and the same
  // messageId applies again.
  await s.sql`update segment_messages set
    received_at = now() - make_interval(days => ${KEEP_DAYS + 1})
    where account_id = ${a.id}`
  await post(a, '/v1/page', { messageId: 'p1', userId: 'u1' })
  await settled(a.id)
  const left = await s.sql`select message_id from segment_messages where account_id = ${a.id}`
  assert.deepEqual(
    left.map((r) => r.message_id),
    ['p1'],
  )
  await post(a, '/v1/group', { ...group, traits: { name: 'D again' } })
  // A track that names its customer is stored as its event, whose messageId deduplicates it for as
  // long as the event is kept (sql/046).
  await post(a, '/v1/track', track('t2'))
  await settled(a.id)
  assert.equal((await a.api('/api/v1/customer/d1', undefined, 'GET')).body.name, 'D again')
  assert.equal((await a.api('/api/v1/customer/d1/events', undefined, 'GET')).body.count, 3)
})

test('time: timestamp corrected for clock skew by sentAt; none takes the receive time', async () => {
  const a = await scoredAccount(s, 'Skew')
  const hour = 3_600_000
  const now = Date.now()
  // The client's clock runs an hour ahead: it stamped the event 10 minutes before it sent it.
  const skewed = new Date(now + hour - 600_000).toISOString()
  const res = await post(a, '/v1/batch', {
    sentAt: new Date(now + hour).toISOString(),
    batch: [
      { type: 'group', groupId: 'k1' },
      { type: 'track', userId: 'u', event: 'a', timestamp: skewed, context: { groupId: 'k1' } },
      { type: 'track', userId: 'u', event: 'b', context: { groupId: 'k1' } },
      {
        type: 'track',
        userId: 'u',
        event: 'c',
        timestamp: skewed,
        sentAt: skewed,
        context: { groupId: 'k1' },
      },
    ],
  })
  assert.equal(res.status, 200)
  await settled(a.id)
  const events = (await a.api('/api/v1/customer/k1/events', undefined, 'GET')).body.events
  const at = Object.fromEntries(events.map((e: any) => [e.name, e.timestamp - now]))
  assert.ok(Math.abs(at.a + 600_000) < 5_000, `a: ${at.a}`)
  assert.ok(Math.abs(at.b) < 5_000, `b: ${at.b}`)
  assert.ok(Math.abs(at.c) < 5_000, `c (sent as stamped, per message): ${at.c}`)
})

// The one time rule (dates.ts): ISO 8601 with a zone, of a real calendar day. Date.parse took each
// of the dropped forms, some in the server's own zone, and rolled 02-30 over to March.
test('time: only ISO 8601 date-times with a zone are read; every other form is dropped and counted', async () => {
  const a = await scoredAccount(s, 'Time forms')
  const valid: Record<string, [string, number]> = {
    zulu: ['2026-11-27T10:00:00Z', Date.UTC(2026, 10, 27, 10)],
    fraction: ['2026-11-27T10:00:00.5Z', Date.UTC(2026, 10, 27, 10, 0, 0, 500)],
    micro_offset: ['2026-11-27T10:00:00.123456+02:00', Date.UTC(2026, 10, 27, 8, 0, 0, 123)],
    minutes_offset: ['2026-11-27T10:00-05:30', Date.UTC(2026, 10, 27, 15, 30)],
  }
  const invalid: Record<string, string> = {
    us: '11/27/2026',
    month_name: 'Nov 27 2026',
    month_name_zone: 'Nov 27 2026 10:00:00 GMT',
    zoneless: '2026-11-27T10:00:00',
    date_only: '2026-11-27',
    no_such_day: '2026-02-30T10:00:00Z',
    hour_24: '2026-11-27T24:00:00Z',
    space: '2026-11-27 10:00:00Z',
    basic_offset: '2026-11-27T10:00:00+0200',
    empty: '',
  }
  const track = (messageId: string, timestamp: string) => ({
    type: 'track',
    messageId,
    userId: 'u',
    event: messageId,
    timestamp,
    context: { groupId: 'k1' },
  })
  const res = await post(a, '/v1/batch', {
    batch: [
      { type: 'group', groupId: 'k1' },
      ...Object.entries(valid).map(([id, [t]]) => track(id, t)),
      ...Object.entries(invalid).map(([id, t]) => track(id, t)),
    ],
  })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  await settled(a.id)
  const events = (await a.api('/api/v1/customer/k1/events', undefined, 'GET')).body.events
  assert.deepEqual(
    Object.fromEntries(events.map((e: any) => [e.name, e.timestamp])),
    Object.fromEntries(Object.entries(valid).map(([id, [, at]]) => [id, at])),
  )
  const st = await status(a)
  assert.deepEqual(st.by_reason, { invalid_timestamp: Object.keys(invalid).length })
  assert.deepEqual(
    st.last_errors.map((e: any) => [e.message_id, e.reason]).sort(),
    Object.keys(invalid)
      .map((id) => [id, 'invalid_timestamp'])
      .sort(),
  )
  assert.match(st.last_errors[0].detail, /ISO 8601 date-time with a zone/)
})

// A track that names its customer is a tracked event, applied by the tracker's apply job; the
// identify before it, by the Segment apply job. Held, the Segment apply keeps the batch's track
// from the tracker's apply; and an identify of a contact unknown until that track creates it
// is applied first, under the track's customer, rather than left waiting while the track makes
// the contact nameless.
test('order: no track of a batch applies before an identify sent before it in the batch', async () => {
  const a = await scoredAccount(s, 'Order')
  assert.equal(
    (
      await post(a, '/v1/batch', {
        batch: [{ type: 'group', groupId: 'acme', traits: { name: 'A' } }],
      })
    ).status,
    200,
  )
  await settled(a.id)
  const held = await s.sql.reserve()
  try {
    await held`begin`
    await held`select pg_advisory_xact_lock(hashtextextended('apply_segment:' || ${a.id}::text, 0))`
    const res = await post(a, '/v1/batch', {
      batch: [
        { type: 'identify', userId: 'pat', traits: { name: 'Pat' }, context: { groupId: 'acme' } },
        { type: 'identify', userId: 'sam', traits: { name: 'Sam' } },
        { type: 'track', userId: 'pat', event: 'e', context: { groupId: 'acme' } },
        { type: 'track', userId: 'sam', event: 'e', context: { groupId: 'acme' } },
      ],
    })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    assert.deepEqual(
      await drainEvents(s.app, a.id),
      { events: 0 },
      'the tracks wait for the identifies',
    )
  } finally {
    await held`rollback`
    held.release()
  }
  await settled(a.id)
  const contacts =
    await s.sql`select t.external_id, t.name, c.external_id as customer from contacts t
    join customers c on c.account_id = t.account_id and c.service_id = t.customer_id
    where t.account_id = ${a.id} order by t.external_id`
  assert.deepEqual(
    contacts.map((r) => [r.external_id, r.name, r.customer]),
    [
      ['pat', 'Pat', 'acme'],
      ['sam', 'Sam', 'acme'],
    ],
  )
  const events = await s.sql`select e.contact_external_id, e.status, t.name from tracking_events e
    join contacts t on t.account_id = e.account_id and t.service_id = e.contact_id
    where e.account_id = ${a.id} order by e.contact_external_id`
  assert.deepEqual(
    events.map((r) => [r.contact_external_id, r.status, r.name]),
    [
      ['pat', 'applied', 'Pat'],
      ['sam', 'applied', 'Sam'],
    ],
  )
  const st = await status(a)
  assert.deepEqual(st.by_status, { received: 0, pending: 0 })
})

test('limits: 32 KB a message, 500 KB and 2,500 messages a batch are 400s, and nothing is stored', async () => {
  const a = await scoredAccount(s, 'Limits')
  const big = (n: number) => ({
    type: 'track',
    userId: 'u',
    event: 'e',
    properties: { x: 'x'.repeat(n) },
  })
  assert.equal((await post(a, '/v1/track', big(32 * 1024))).status, 400)
  assert.equal((await post(a, '/v1/batch', { batch: [big(10), big(33 * 1024)] })).status, 400)
  const batch = Array.from({ length: 20 }, () => big(26 * 1024))
  const over = await post(a, '/v1/batch', { batch })
  assert.equal(over.status, 400, JSON.stringify(over.body))
  assert.match(over.body.detail ?? over.body.title, /500|bytes/)
  assert.equal(
    (await post(a, '/v1/batch', { batch: batch.slice(0, 15) })).status,
    200,
    'just under both limits',
  )
  assert.equal((await post(a, '/v1/batch', '{"batch": [')).status, 400, 'not JSON')
  const many = await post(a, '/v1/batch', { batch: Array.from({ length: 2501 }, () => ({})) })
  assert.deepEqual(
    [many.status, many.body.errors?.[0]?.path],
    [400, '/batch'],
    'tiny messages by the thousand',
  )
  const [{ n }] =
    await s.sql`select count(*)::int as n from segment_messages where account_id = ${a.id}`
  assert.equal(n, 15)
})

test('auth: Basic user or body writeKey; a bad or missing key is a 401', async () => {
  const a = await scoredAccount(s, 'Auth')
  const msg = { userId: 'u', event: 'e', context: { groupId: 'x' } }
  assert.equal((await post(a, '/v1/track', msg)).status, 200)
  assert.equal((await s.call('POST', '/v1/track', { ...msg, writeKey: a.token })).status, 200)
  const gz = await fetch(`${s.base}/v1/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gzipSync(JSON.stringify({ batch: [msg], writeKey: a.token })),
  })
  assert.equal(gz.status, 200, await gz.text())
  assert.equal((await s.call('POST', '/v1/track', msg)).status, 401)
  assert.equal((await s.call('POST', '/v1/track', { ...msg, writeKey: 'nope' })).status, 401)
  const forged = `sk_${a.id}_${'x'.repeat(32)}`
  assert.equal(
    (await s.call('POST', '/v1/batch', { batch: [msg] }, { authorization: basic(forged) })).status,
    401,
  )
  const search = await s.admin('POST', `/accounts/${a.id}/keys`, { scopes: ['search'] })
  assert.equal(
    (await s.call('POST', '/v1/track', { ...msg, writeKey: search.body.token })).status,
    403,
  )
  // Both given: the same key is fine; two keys are refused, whichever of them is valid.
  assert.equal((await post(a, '/v1/track', { ...msg, writeKey: a.token })).status, 200)
  const other = await s.admin('POST', `/accounts/${a.id}/keys`, { scopes: ['track'] })
  const stored = async () =>
    (
      await s.sql`select (select count(*) from segment_messages where account_id = ${a.id})
      + (select count(*) from tracking_events where account_id = ${a.id}) as n`
    )[0].n
  const before = await stored()
  for (const [path, body] of [
    ['/v1/track', { ...msg, writeKey: other.body.token }],
    ['/v1/batch', { batch: [msg], writeKey: other.body.token }],
    ['/v1/batch', { batch: [msg], writeKey: 'nope' }],
  ] as const) {
    const res = await post(a, path, body)
    assert.equal(res.status, 400, `${path}: ${JSON.stringify(res.body)}`)
    assert.match(res.body.detail, /Basic user name and writeKey name different keys/)
    assert.deepEqual(
      res.body.errors.map((e: any) => e.path),
      ['/writeKey'],
    )
  }
  assert.equal(await stored(), before, 'no message of a refused request is stored')
})

test('the ingest status takes the Basic login of a track key (README), or the service-key header', async () => {
  const a = await scoredAccount(s, 'Status login')
  const get = (headers: Record<string, string>) =>
    s.call('GET', '/api/v1/ingest/status', undefined, headers)
  const byBasic = await get({ authorization: basic(a.token) })
  assert.equal(byBasic.status, 200, JSON.stringify(byBasic.body))
  assert.deepEqual(byBasic.body.by_status, { received: 0, pending: 0 })
  assert.equal((await get({ 'service-key': a.token })).status, 200)
  assert.equal((await get({})).status, 401)
  assert.equal((await get({ authorization: basic(`sk_${a.id}_${'x'.repeat(32)}`) })).status, 401)
  const search = await s.admin('POST', `/accounts/${a.id}/keys`, { scopes: ['search'] })
  assert.equal((await get({ authorization: basic(search.body.token) })).status, 403)
  // Another account's key reads its own account's status.
  const b = await scoredAccount(s, 'Status other')
  await post(b, '/v1/track', { userId: 'u', event: 'e' })
  assert.equal((await get({ authorization: basic(a.token) })).body.by_type.track, undefined)
})

test('a FILE account: 200, nothing written, the reason counted', async () => {
  const a = await scoredAccount(s, 'File')
  assert.equal(
    (await s.admin('PATCH', `/accounts/${a.id}`, { source_of_truth: 'FILE' })).status,
    200,
  )
  const res = await post(a, '/v1/batch', {
    batch: [
      { type: 'group', groupId: 'f1', userId: 'u', traits: { name: 'F' } },
      { type: 'identify', userId: 'u', traits: { name: 'U' } },
      { type: 'track', userId: 'u', event: 'logins', context: { groupId: 'f1' } },
    ],
  })
  assert.deepEqual([res.status, res.body], [200, { success: true }])
  await settled(a.id)
  const [{ n }] = await s.sql`select (select count(*) from customers where account_id = ${a.id})
    + (select count(*) from contacts where account_id = ${a.id})
    + (select count(*) from tracking_events where account_id = ${a.id}) as n`
  assert.equal(Number(n), 0)
  assert.deepEqual((await status(a)).by_reason, { source_of_truth: 3 })
  const admin = await s.admin('GET', `/accounts/${a.id}/ingest`)
  assert.deepEqual(admin.body.by_reason, { source_of_truth: 3 })
})

test('a pending identify is applied by a later group; pending ones expire, counted', async () => {
  const a = await scoredAccount(s, 'Pending')
  await post(a, '/v1/identify', { userId: 'late', traits: { name: 'Late Comer', role: 'viewer' } })
  await post(a, '/v1/identify', { userId: 'never', traits: { name: 'Nobody' } })
  await settled(a.id)
  assert.deepEqual((await status(a)).by_status, { received: 0, pending: 2 })
  await post(a, '/v1/group', { userId: 'late', groupId: 'p1', traits: { name: 'P' } })
  await settled(a.id)
  const p = await a.api('/api/v1/customer/p1/contact/late', undefined, 'GET')
  assert.equal(p.status, 200, JSON.stringify(p.body))
  assert.equal(p.body.name, 'Late Comer')
  assert.deepEqual(p.body.properties, { role: 'viewer' })
  // An identify with context.groupId of a known customer creates its contact at once.
  await post(a, '/v1/identify', {
    userId: 'direct',
    traits: { name: 'Dee' },
    context: { groupId: 'p1' },
  })
  await settled(a.id)
  assert.equal((await a.api('/api/v1/customer/p1/contact/direct', undefined, 'GET')).status, 200)
  // The one still pending, made older than PENDING_HOURS, expires at the account's next apply.
  await s.sql`update segment_messages set
    received_at = now() - make_interval(hours => ${PENDING_HOURS + 1})
    where account_id = ${a.id} and status = 'pending'`
  await post(a, '/v1/page', { userId: 'late', name: 'Home' })
  await settled(a.id)
  const st = await status(a)
  assert.deepEqual(st.by_status, { received: 0, pending: 0 })
  assert.deepEqual(st.by_reason, { pending_expired: 1 })
  assert.deepEqual(st.by_type, { identify: 3, group: 1, page: 1 })
})

test('at most PENDING_MAX identifies wait an account: the next unknown user is dropped, pending_full', async () => {
  const a = await scoredAccount(s, 'Pending full')
  await s.sql`insert into segment_messages (account_id, message_id, type, user_id, occurred_at,
    traits, status)
    select ${a.id}, 'waiting-' || g, 'identify', 'waiting-' || g, now(), '{"name": "W"}', 'pending'
    from generate_series(1, ${PENDING_MAX - 1}) g`
  const res = await post(a, '/v1/batch', {
    batch: [
      { type: 'identify', messageId: 'last-place', userId: 'last-place', traits: { name: 'L' } },
      {
        type: 'identify',
        messageId: 'one-too-many',
        userId: 'one-too-many',
        traits: { name: 'O' },
      },
    ],
  })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  await settled(a.id)
  const st = await status(a)
  assert.deepEqual(st.by_status, { received: 0, pending: PENDING_MAX })
  assert.deepEqual(st.by_reason, { pending_full: 1 })
  assert.deepEqual(
    st.last_errors.map((e: any) => [e.message_id, e.reason]),
    [['one-too-many', 'pending_full']],
  )
})

test('dropped trait keys are counted by name for at most MAX_KEY_NAMES names; known names go on counting', async () => {
  const a = await scoredAccount(s, 'Key names')
  const names = Array.from(
    { length: MAX_KEY_NAMES },
    (_, i) => `unknown_${String(i).padStart(3, '0')}`,
  )
  await post(a, '/v1/group', {
    groupId: 'k1',
    traits: Object.fromEntries(names.map((n) => [n, 1])),
  })
  await settled(a.id)
  await post(a, '/v1/group', { groupId: 'k1', traits: { [names[0]]: 2, one_name_too_many: 3 } })
  await settled(a.id)
  const keys = (await status(a)).dropped_key_names
  assert.equal(keys.length, MAX_KEY_NAMES)
  assert.ok(!keys.some((k: any) => k.key === 'one_name_too_many'))
  assert.deepEqual(
    keys.find((k: any) => k.key === names[0]),
    { entity: 'customer', key: names[0], count: 2, did_you_mean: null },
  )
})

test('a backlog of more batches than one job applies is applied whole, through its successor job', async () => {
  const a = await scoredAccount(s, 'Backlog')
  const n = MESSAGES_PER_BATCH * BATCHES_PER_JOB + 1
  await s.sql`insert into segment_messages (account_id, message_id, type, user_id, group_id, event,
    occurred_at)
    select ${a.id}, 'backlog-' || g, 'track', 'u1', 'g1', 'logins', now()
      from generate_series(1, ${n}) g`
  // The intake of a message for the Segment apply job queues it.
  await post(a, '/v1/page', { userId: 'u1', name: 'Home' })
  await settled(a.id, 120_000)
  const [{ events }] =
    await s.sql`select count(*)::int as events from tracking_events where account_id = ${a.id}`
  assert.equal(events, n)
  assert.deepEqual((await status(a)).by_type, { page: 1, track: n })
})

test('pending identifies wait, unwritten, through identifies that cannot place them; placed when one can', async () => {
  const a = await scoredAccount(s, 'Restage')
  const contact = async (customer: string, user: string) => {
    const res = await a.api(`/api/v1/customer/${customer}/contact/${user}`, undefined, 'GET')
    assert.equal(res.status, 200, JSON.stringify(res.body))
    return res.body
  }
  const pendingRows = () =>
    s.sql`select id, xmin::text from segment_messages where account_id = ${a.id}
      and status = 'pending' order by id`
  await post(a, '/v1/group', { groupId: 'r1', traits: { name: 'R1' } })
  await post(a, '/v1/identify', { userId: 'w', traits: { name: 'Wanda' } })
  await settled(a.id)
  const [first] = await pendingRows()
  // A second identify of the user still unknown places nobody: the first is neither
  // restaged nor written.
  await post(a, '/v1/identify', { userId: 'w', traits: { role: 'viewer' } })
  await settled(a.id)
  const rows = await pendingRows()
  assert.equal(rows.length, 2)
  assert.deepEqual(rows[0], first)
  // An identify with context.groupId of a known customer places the user and both
  // pending identifies.
  await post(a, '/v1/identify', { userId: 'w', traits: {}, context: { groupId: 'r1' } })
  await settled(a.id)
  assert.equal((await pendingRows()).length, 0)
  const w = await contact('r1', 'w')
  assert.equal(w.name, 'Wanda')
  assert.deepEqual(w.properties, { role: 'viewer' })
  // A user a track made a contact: its pending identify is placed by its next identify.
  await post(a, '/v1/identify', { userId: 'v', traits: { name: 'Vee' } })
  await settled(a.id)
  await post(a, '/v1/track', { userId: 'v', event: 'login', context: { groupId: 'r1' } })
  await settled(a.id)
  await post(a, '/v1/identify', { userId: 'v', traits: { role: 'admin' } })
  await settled(a.id)
  const v = await contact('r1', 'v')
  assert.equal(v.name, 'Vee')
  assert.deepEqual(v.properties, { role: 'admin' })
  // A pending identify naming a customer unknown then: placed once the customer exists.
  await post(a, '/v1/identify', {
    userId: 'g',
    traits: { name: 'Gee' },
    context: { groupId: 'r2' },
  })
  await settled(a.id)
  await post(a, '/v1/group', { groupId: 'r2', traits: { name: 'R2' } })
  await settled(a.id)
  assert.equal((await pendingRows()).length, 1)
  await post(a, '/v1/identify', { userId: 'g', traits: {} })
  await settled(a.id)
  assert.equal((await contact('r2', 'g')).name, 'Gee')
  assert.equal((await pendingRows()).length, 0)
})

test("tracks are stored matched as the tracker matches its events; an unknown customer's are unmatched", async () => {
  const a = await scoredAccount(s, 'Matched')
  await post(a, '/v1/group', { userId: 'u1', groupId: 'm1', traits: { name: 'M' } })
  await settled(a.id)
  const track = (messageId: string, userId: string, groupId?: string) => ({
    type: 'track',
    messageId,
    userId,
    event: 'logins',
    ...(groupId ? { context: { groupId } } : {}),
  })
  const batch = [track('t1', 'u2', 'm1'), track('t2', 'u1'), track('t3', 'u3', 'nobody')]
  assert.equal((await post(a, '/v1/batch', { batch })).status, 200)
  await settled(a.id)
  // u2, unknown, is created under the customer of its first event, as the tracker creates contacts.
  assert.equal((await a.api('/api/v1/customer/m1/contact/u2', undefined, 'GET')).status, 200)
  const events = await a.api('/api/v1/customer/m1/events', undefined, 'GET')
  assert.equal(events.body.by_status.applied, 2, JSON.stringify(events.body))
  assert.deepEqual(events.body.events.map((e: any) => e.identification.contact).sort(), [
    'u1',
    'u2',
  ])
  const rows = await s.sql`select contact_external_id as user, status, customer_id, contact_id
      from tracking_events
    where account_id = ${a.id} order by contact_external_id`
  assert.deepEqual(
    rows.map((r) => [r.user, r.status, r.customer_id !== null, r.contact_id !== null]),
    [
      ['u1', 'applied', true, true],
      ['u2', 'applied', true, true],
      ['u3', 'unmatched', false, false],
    ],
  )
})

test('per-message problems do not fail the batch: counted by reason, named in the status and /metrics', async () => {
  const a = await scoredAccount(s, 'Problems')
  const res = await post(a, '/v1/batch', {
    batch: [
      {
        type: 'group',
        messageId: 'ok',
        groupId: 'x1',
        traits: { name: 'X', contry: 'DE', has_sso: 'yes' },
      },
      { type: 'identify', messageId: 'no-user', traits: { name: 'N' } },
      { type: 'identify', messageId: 'anon', anonymousId: 'a-1', traits: { name: 'N' } },
      { type: 'track', messageId: 'no-event', userId: 'u', context: { groupId: 'x1' } },
      { type: 'track', messageId: 'no-customer', userId: 'stranger', event: 'e' },
      { type: 'group', messageId: 'no-group' },
      { type: 'frobnicate', messageId: 'odd' },
      { type: 'track', messageId: 'bad-time', userId: 'u', event: 'e', timestamp: 'yesterday' },
      'not a message',
      { type: 'alias', messageId: 'alias', userId: 'u', previousId: 'v' },
      { type: 'screen', messageId: 'screen', userId: 'u', name: 'S' },
    ],
  })
  assert.deepEqual([res.status, res.body], [200, { success: true }])
  await settled(a.id)
  const st = await status(a)
  assert.deepEqual(st.by_reason, {
    invalid_trait: 1,
    missing_user_id: 1,
    anonymous_only: 1,
    missing_event: 1,
    no_customer: 1,
    missing_group_id: 1,
    unknown_type: 1,
    not_an_object: 1,
    invalid_timestamp: 1,
  })
  assert.deepEqual(st.dropped_key_names, [
    { entity: 'customer', key: 'contry', count: 1, did_you_mean: 'country' },
  ])
  const errors = Object.fromEntries(st.last_errors.map((e: any) => [e.message_id, e]))
  assert.equal(errors.ok.reason, 'invalid_trait')
  assert.equal(errors.ok.detail, 'traits.has_sso: must be boolean')
  assert.equal(errors['no-customer'].reason, 'no_customer')
  assert.equal(st.last_errors.length, 9)
  const customer = await a.api('/api/v1/customer/x1', undefined, 'GET')
  assert.deepEqual(
    [customer.body.name, customer.body.properties],
    ['X', {}],
    'the rest of the message applied',
  )
  const metrics = (await s.call('GET', '/metrics')).body as string
  assert.match(metrics, /service_segment_dropped_total\{reason="no_customer"\} [1-9]/)
  assert.match(metrics, /service_segment_messages_total\{type="alias",outcome="ignored"\} [1-9]/)
})

test('a key holding NUL or an unpaired surrogate: dropped, invalid_value, with a detail naming its path', async () => {
  const a = await scoredAccount(s, 'Odd keys')
  const track = (messageId: string, properties: object) => ({
    type: 'track',
    messageId,
    userId: 'u',
    event: 'e',
    properties,
    context: { groupId: 'k1' },
  })
  const res = await post(a, '/v1/batch', {
    batch: [
      track('nul', { plan: { 'a\0b': 1 } }),
      track('high', { 'x\uD800': 1 }),
      track('low', { '\uDC00y': 1 }),
      track('long', { [`${'k'.repeat(199)}\u{1F600}z`]: 'v\0' }),
    ],
  })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  await settled(a.id)
  const st = await status(a)
  assert.deepEqual(st.by_reason, { invalid_value: 4 })
  const detail = Object.fromEntries(st.last_errors.map((e: any) => [e.message_id, e.detail]))
  const key = 'Its key: Must not contain NUL characters or unpaired surrogates.'
  assert.deepEqual(detail, {
    nul: `/properties/plan/a\uFFFDb: ${key}`,
    high: `/properties/x\uFFFD: ${key}`,
    low: `/properties/\uFFFDy: ${key}`,
    long: `/properties/${'k'.repeat(199)}\u{1F600}... (201 characters): ${key.replace('Its key: ', '')}`,
  })
})

// A key of 6,000 characters that compress badly needs an index entry of 18 KB: stored whole, it
// failed the apply job again and again, and held the account's queue.
test('a long dropped trait key is named cut to 200 characters, at code points, and applies', async () => {
  const a = await scoredAccount(s, 'Long keys')
  const wide = Array.from({ length: 6000 }, (_, i) =>
    String.fromCodePoint(0x4e00 + ((i * 7919) % 20000)),
  ).join('')
  const emoji = `${'k'.repeat(199)}\u{1F600}tail`
  const res = await post(a, '/v1/batch', {
    batch: [{ type: 'group', groupId: 'g', traits: { name: 'G', [wide]: 1, [emoji]: 2 } }],
  })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  await settled(a.id)
  const st = await status(a)
  assert.deepEqual(st.by_type, { group: 1 })
  assert.deepEqual(
    st.dropped_key_names.map((d: any) => d.key).sort(),
    [
      `${wide.slice(0, 200)}... (6,000 characters)`,
      `${'k'.repeat(199)}\u{1F600}... (204 characters)`,
    ].sort(),
  )
  assert.equal((await a.api('/api/v1/customer/g', undefined, 'GET')).body.name, 'G')
})

test('hostile messages from the hardening corpus: never a 5xx, every 200 applied without a failed job', async () => {
  const a = await scoredAccount(s, 'Hostile')
  for (const [i, c] of hostileRecords.entries()) {
    const batch = [
      {
        type: 'group',
        messageId: c.id,
        groupId: c.id || `g${i}`,
        userId: c.name,
        traits: { name: c.name, country: c.country, plan_started: c.date },
      },
      {
        type: 'identify',
        messageId: `${c.id}i`,
        userId: c.name,
        traits: { name: c.title, [c.plan]: c.country },
      },
      {
        type: 'track',
        messageId: `${c.id}t`,
        userId: c.name,
        event: c.title,
        timestamp: c.date,
        sentAt: c.plan,
        properties: { [c.country]: c.plan },
        context: { groupId: c.id },
      },
      { type: c.title, messageId: c.plan, userId: c.id },
    ]
    const answers = [
      await post(a, '/v1/batch', { batch }),
      await post(a, '/v1/track', batch[2]),
      await s.call('POST', '/v1/identify', { ...batch[1], writeKey: c.name }),
    ]
    for (const res of answers)
      assert.ok(res.status < 500, `${i}: ${res.status} ${JSON.stringify(res.body)}`)
  }
  await settled(a.id, 60_000)
  const failed = await s.sql`select task_identifier, last_error from graphile_worker.jobs
      where last_error is not null`
  assert.equal(failed.length, 0, JSON.stringify(failed))
})
