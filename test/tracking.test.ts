import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { createServer } from 'node:http'
import { promisify } from 'node:util'
import fc from 'fast-check'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import type { PropertyType } from '../src/property.ts'
import type { Refusal } from '../src/errors.ts'
import { fitsType, MAX_DEPTH } from '../src/values.ts'
import { applyEvents, applyEventsOfAccount } from '../src/tracking/apply.ts'
import { BATCHES_PER_JOB } from '../src/tracking/intake/batches.ts'
import { EVENTS_PER_BATCH } from '../src/tracking/tracker/apply.ts'
import { eventsToStore } from '../src/tracking/tracker/schemas.ts'
import { passGate, throughGate } from '../src/tracking/intake/gate.ts'
import { TASKS } from '../src/db/jobs.ts'

let s: TestService
// The tracking rate limit stays at its default (200 a minute per key).
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
})
after(() => s.stop())

type Account = Awaited<ReturnType<TestService['account']>>
const NOW = Date.now()
const DAY = 86_400_000
const today = new Date().toISOString().slice(0, 10)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const paths = (res: { body: any }) => (res.body.errors ?? []).map((e: { path: string }) => e.path)
const ev = (over: object = {}) => ({
  name: 'login',
  timestamp: NOW,
  identification: { customer: 'c1' },
  ...over,
})

const setUpTracking = async (a: Account) => {
  const res = await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return a
}
const track = (a: Account, events: unknown[], trackerKey = a.trackerKey) =>
  a.api('/api/tracker/track', { trackerKey, events })
const stored = async (accountId: number) =>
  (await s.sql`select count(*)::int as n from tracking_events where account_id = ${accountId}`)[0]
    .n as number

// Processing is done when no event of the account is still 'received' (the apply job commits the
// record updates and the events' new states together).
const waitApplied = async (accountId: number, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const [{ n }] =
      await s.sql`select count(*)::int as n from tracking_events where account_id = ${accountId}
      and status = 'received'`
    if (n === 0) return
    if (Date.now() > deadline) throw new Error(`${n} events of account ${accountId} still received`)
    await sleep(50)
  }
}
const trackAndApply = async (a: Account, events: unknown[]) => {
  const res = await track(a, events)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  await waitApplied(a.id)
  return res
}

const upload = async (a: Account, kind: 'customers' | 'contacts', items: object[]) => {
  await uploadAndWait(a.api, kind, items)
}

// ---- validation -------------------------------------------------------------------------------

let valid: Account
const validationCases: [string, (key: string) => unknown, string[]][] = [
  ['trackerKey missing', () => ({ events: [ev()] }), ['/trackerKey']],
  ['events missing', (k) => ({ trackerKey: k }), ['/events']],
  ['both missing (empty body)', () => '', ['/trackerKey', '/events']],
  ['events not an array', (k) => ({ trackerKey: k, events: { 0: ev() } }), ['/events']],
  [
    'more than 100 events',
    (k) => ({ trackerKey: k, events: Array.from({ length: 101 }, () => ev()) }),
    ['/events'],
  ],
  ['an event not an object', (k) => ({ trackerKey: k, events: [ev(), 'login'] }), ['/events/1']],
  [
    'name missing',
    (k) => ({ trackerKey: k, events: [{ timestamp: NOW, identification: { customer: 'c1' } }] }),
    ['/events/0/name'],
  ],
  ['name empty', (k) => ({ trackerKey: k, events: [ev({ name: '' })] }), ['/events/0/name']],
  [
    'name over 255 characters',
    (k) => ({ trackerKey: k, events: [ev({ name: 'n'.repeat(256) })] }),
    ['/events/0/name'],
  ],
  [
    'timestamp missing',
    (k) => ({ trackerKey: k, events: [{ name: 'x', identification: { customer: 'c1' } }] }),
    ['/events/0/timestamp'],
  ],
  [
    'timestamp a string',
    (k) => ({ trackerKey: k, events: [ev({ timestamp: String(NOW) })] }),
    ['/events/0/timestamp'],
  ],
  [
    'timestamp not whole milliseconds',
    (k) => ({ trackerKey: k, events: [ev({ timestamp: NOW + 0.5 })] }),
    ['/events/0/timestamp'],
  ],
  [
    'timestamp in seconds',
    (k) => ({ trackerKey: k, events: [ev({ timestamp: Math.floor(NOW / 1000) })] }),
    ['/events/0/timestamp'],
  ],
  [
    'timestamp after 2100',
    (k) => ({ trackerKey: k, events: [ev({ timestamp: Date.UTC(2100, 0, 1) })] }),
    ['/events/0/timestamp'],
  ],
  [
    'identification missing',
    (k) => ({ trackerKey: k, events: [{ name: 'x', timestamp: NOW }] }),
    ['/events/0/identification'],
  ],
  [
    'identification.customer missing',
    (k) => ({ trackerKey: k, events: [ev({ identification: { contact: 'p1' } })] }),
    ['/events/0/identification/customer'],
  ],
  [
    'identification.customer empty',
    (k) => ({ trackerKey: k, events: [ev({ identification: { customer: '' } })] }),
    ['/events/0/identification/customer'],
  ],
  [
    'identification.customer over 255',
    (k) => ({ trackerKey: k, events: [ev({ identification: { customer: 'c'.repeat(256) } })] }),
    ['/events/0/identification/customer'],
  ],
  [
    'identification.contact over 255',
    (k) => ({
      trackerKey: k,
      events: [ev({ identification: { customer: 'c1', contact: 'p'.repeat(256) } })],
    }),
    ['/events/0/identification/contact'],
  ],
  [
    'identification.contact a number',
    (k) => ({ trackerKey: k, events: [ev({ identification: { customer: 'c1', contact: 7 } })] }),
    ['/events/0/identification/contact'],
  ],
  [
    'data not an object',
    (k) => ({ trackerKey: k, events: [ev({ data: 'x' })] }),
    ['/events/0/data'],
  ],
  [
    'data.customer an array',
    (k) => ({ trackerKey: k, events: [ev({ data: { customer: [1] } })] }),
    ['/events/0/data/customer'],
  ],
  [
    'data.contact a string',
    (k) => ({ trackerKey: k, events: [ev({ data: { contact: 'x' } })] }),
    ['/events/0/data/contact'],
  ],
  [
    'an event over 32 KB',
    (k) => ({
      trackerKey: k,
      events: [ev(), ev({ data: { customer: { note: 'x'.repeat(33_000) } } })],
    }),
    ['/events/1'],
  ],
  [
    'a NUL character in a value',
    (k) => ({ trackerKey: k, events: [ev({ data: { contact: { note: 'a\u0000b' } } })] }),
    ['/events/0/data/contact/note'],
  ],
  [
    'an unpaired surrogate in a name',
    (k) => ({ trackerKey: k, events: [ev({ name: 'a\ud800' })] }),
    ['/events/0/name'],
  ],
  [
    'a NUL character in a key',
    (k) => ({ trackerKey: k, events: [ev({ data: { customer: { 'a\u0000': 1 } } })] }),
    ['/events/0/data/customer/a\u0000'],
  ],
  [
    'a NUL character in free-form data that is otherwise ignored',
    (k) => ({ trackerKey: k, events: [ev({ data: { customer: { ignored: ['\u0000'] } } })] }),
    ['/events/0/data/customer/ignored/0'],
  ],
  [
    'errors in several events are all reported',
    (k) => ({
      trackerKey: k,
      events: [ev(), ev({ name: '' }), ev({ timestamp: 1.5, identification: {} })],
    }),
    ['/events/1/name', '/events/2/timestamp', '/events/2/identification/customer'],
  ],
]

test('validation: setup', async () => {
  valid = await setUpTracking(await s.account('Validation'))
})

for (const [name, body, expected] of validationCases) {
  test(`tracking refuses with 400: ${name}`, async () => {
    const res = await valid.api('/api/tracker/track', body(valid.trackerKey))
    assert.equal(res.status, 400, JSON.stringify(res.body))
    assert.equal(res.headers.get('content-type'), 'application/problem+json')
    assert.deepEqual(paths(res).sort(), expected.sort(), JSON.stringify(res.body))
    assert.equal(await stored(valid.id), 0, 'nothing is stored from a refused request')
  })
}

test('tracking refuses invalid JSON with 400, a body over 5 MB with 413, other methods with 405', async () => {
  const res = await s.call('POST', '/api/tracker/track', '{"trackerKey": "CS-', {
    'content-type': 'application/json',
    'service-key': valid.token,
  })
  assert.equal(res.status, 400)
  assert.match(res.body.detail, /JSON/)
  const big = await valid.api('/api/tracker/track', {
    trackerKey: valid.trackerKey,
    events: [],
    pad: 'x'.repeat(5 * 1024 * 1024),
  })
  assert.equal(big.status, 413)
  const get = await valid.api('/api/tracker/track', undefined, 'GET')
  assert.equal(get.status, 405)
  assert.equal(get.headers.get('allow'), 'POST')
  assert.equal(await stored(valid.id), 0)
})

test('an event of exactly 32 KB is accepted, one byte more is refused', async () => {
  const sized = (bytes: number) => {
    const event = {
      name: 'big',
      timestamp: NOW,
      identification: { customer: 'c1' },
      data: { customer: { note: '' } },
    }
    event.data.customer.note = 'é'.repeat(
      Math.floor((bytes - Buffer.byteLength(JSON.stringify(event))) / 2),
    )
    if (Buffer.byteLength(JSON.stringify(event)) < bytes) event.data.customer.note += 'x'
    assert.equal(Buffer.byteLength(JSON.stringify(event)), bytes)
    return event
  }
  const ok = await track(valid, [sized(32 * 1024)])
  assert.equal(ok.status, 200, JSON.stringify(ok.body))
  const over = await track(valid, [sized(32 * 1024 + 1)])
  assert.equal(over.status, 400)
  assert.deepEqual(paths(over), ['/events/0'])
  assert.equal(await stored(valid.id), 1)
})

test('a body nested too deeply for PostgreSQL is refused with 400, not 500', async () => {
  const depth = 100_000
  const body =
    `{"trackerKey":"${valid.trackerKey}","junk":${'['.repeat(depth) + ']'.repeat(depth)},` +
    `"events":[${JSON.stringify(ev())}]}`
  const before = await stored(valid.id)
  const res = await s.call('POST', '/api/tracker/track', body, {
    'content-type': 'application/json',
    'service-key': valid.token,
  })
  assert.equal(res.status, 400, JSON.stringify(res.body))
  assert.equal(await stored(valid.id), before)
})

test('events are stored as parsed: pretty-printed bodies, escapes and emoji are fine', async () => {
  const before = await stored(valid.id)
  const event = ev({
    name: 'caf\u00e9 \ud83d\ude00',
    identification: { customer: 'c-\u00fc' },
    data: { contact: { note: 'line\nbreak' } },
  })
  // Pretty-printed, with the non-ASCII characters sent as \u escapes (a surrogate pair
  // for the emoji).
  const text = JSON.stringify({ trackerKey: valid.trackerKey, events: [event] }, null, 2).replace(
    /[^\x00-\x7f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
  assert.match(text, /\\ud83d\\ude00/)
  const res = await s.call('POST', '/api/tracker/track', text, {
    'content-type': 'application/json',
    'service-key': valid.token,
  })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  const [row] =
    await s.sql`select name, customer_external_id, data, occurred_at from tracking_events
      where account_id = ${valid.id}
      order by id desc limit 1`
  assert.deepEqual(
    { ...row },
    {
      name: 'caf\u00e9 \ud83d\ude00',
      customer_external_id: 'c-\u00fc',
      data: { contact: { note: 'line\nbreak' } },
      occurred_at: new Date(NOW),
    },
  )
  assert.equal(await stored(valid.id), before + 1)
})

test('eventsToStore serializes each event again, and refuses at its path what cannot be stored', () => {
  fc.assert(
    fc.property(fc.array(fc.jsonValue(), { maxLength: 5 }), (events) => {
      assert.equal(eventsToStore({ trackerKey: 'CS-X', events }), JSON.stringify(events))
    }),
  )
  const refused = (body: unknown) => {
    try {
      eventsToStore(body)
      return []
    } catch (err) {
      return ((err as Refusal).errors ?? []).map((e) => e.path)
    }
  }
  const data = {
    customer: { a: Infinity, 'b/c': [-Infinity] },
    x: 'a\u0000',
    ['\ud800']: 1,
    ok: [1e308, 5e-324],
  }
  assert.deepEqual(refused({ trackerKey: 'CS-X', events: [{ data }] }), [
    '/events/0/data/customer/a',
    '/events/0/data/customer/b~1c/0',
    '/events/0/data/x',
    '/events/0/data/\ud800',
  ])
  const deep = (n: number): unknown => (n === 0 ? 1 : [deep(n - 1)])
  // The body, events and the event take three levels of the hundred.
  assert.deepEqual(refused({ events: [{ data: deep(MAX_DEPTH - 3) }] }), [])
  assert.deepEqual(refused({ events: [{ data: deep(MAX_DEPTH - 2) }] }), [
    `/events/0/data${'/0'.repeat(MAX_DEPTH - 3)}`,
  ])
})

test('a valid request answers 200 with the count; an empty events array is accepted and stores nothing', async () => {
  const before = await stored(valid.id)
  const res = await track(valid, [
    ev(),
    ev({ name: 'signup', identification: { customer: 'c2', contact: null }, data: null }),
    ev({ data: { customer: null, contact: null } }),
  ])
  assert.equal(res.status, 200)
  assert.deepEqual(res.body, { status: 'received', events: 3 })
  const empty = await track(valid, [])
  assert.deepEqual([empty.status, empty.body], [200, { status: 'received', events: 0 }])
  assert.equal(await stored(valid.id), before + 3)
  await waitApplied(valid.id) // null data is no data: the job does not trip over it
})

// ---- auth ---------------------------------------------------------------------------------------

test('auth: missing, unknown and revoked keys are 401; nothing is stored', async () => {
  const a = await setUpTracking(await s.account())
  const body = { trackerKey: a.trackerKey, events: [ev()] }
  const post = (key?: string) =>
    s.call('POST', '/api/tracker/track', body, key === undefined ? {} : { 'service-key': key })
  assert.equal((await post()).status, 401)
  assert.equal((await post('nonsense')).status, 401)
  assert.equal((await post(a.token.slice(0, -4) + 'AAAA')).status, 401)
  assert.equal((await post(`sk_${a.id}_${'b'.repeat(43)}`)).status, 401)
  const key = (await s.admin('POST', `/accounts/${a.id}/keys`, { scopes: ['track'] })).body
  assert.equal((await post(key.token)).status, 200)
  assert.equal((await s.admin('DELETE', `/accounts/${a.id}/keys/${key.id}`)).status, 204)
  const revoked = await post(key.token)
  assert.equal(revoked.status, 401)
  assert.equal(revoked.headers.get('content-type'), 'application/problem+json')
  assert.equal(await stored(a.id), 1, 'only the request with the valid key stored its event')
})

const trackAuthTitle =
  'auth: 403 for a key without the track scope, a foreign trackerKey, and an account without tracking set up'
test(trackAuthTitle, async () => {
  const a = await setUpTracking(await s.account())
  const other = await setUpTracking(await s.account('Other'))
  const noTracking = await s.account('No tracking')
  const searchOnly = (
    await s.admin('POST', `/accounts/${a.id}/keys`, { scopes: ['search', 'upload'] })
  ).body.token
  const noScope = await s.call(
    'POST',
    '/api/tracker/track',
    { trackerKey: a.trackerKey, events: [ev()] },
    { 'service-key': searchOnly },
  )
  assert.equal(noScope.status, 403)
  assert.match(noScope.body.detail, /track/)
  const foreign = await track(a, [ev()], other.trackerKey)
  assert.equal(foreign.status, 403)
  assert.match(foreign.body.detail, /trackerKey/)
  const unknownKey = await track(a, [ev()], 'CS-NOSUCHKEY')
  assert.equal(unknownKey.status, 403)
  const notSetUp = await track(noTracking, [ev()])
  assert.equal(notSetUp.status, 403)
  assert.match(notSetUp.body.detail, /not set up/)
  for (const id of [a.id, other.id, noTracking.id]) assert.equal(await stored(id), 0)
  // Once a domain is added, the same request passes.
  await setUpTracking(noTracking)
  assert.equal((await track(noTracking, [ev()])).status, 200)
})

// ---- rate limit ---------------------------------------------------------------------------------

test('rate limit: the 201st request in a minute is 429 with Retry-After and RateLimit headers', async () => {
  const a = await setUpTracking(await s.account())
  // All 201 requests must fall into one fixed window: with less than 20 s left of this minute,
  // start at the next one.
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 20_000) await sleep(left + 100)
  const firstWindow = Math.floor(Date.now() / 60_000)
  const statuses: number[] = []
  for (let batch = 0; batch < 10; batch++) {
    const answers = await Promise.all(Array.from({ length: 20 }, () => track(a, [])))
    statuses.push(...answers.map((r) => r.status))
    if (batch === 0) assert.equal(answers[0].headers.get('ratelimit-limit'), '200')
  }
  assert.deepEqual(statuses, Array(200).fill(200))
  const limited = await track(a, [ev()])
  assert.equal(
    Math.floor(Date.now() / 60_000),
    firstWindow,
    'the 201 requests took place in one minute',
  )
  assert.equal(limited.status, 429)
  assert.equal(limited.headers.get('content-type'), 'application/problem+json')
  const retry = Number(limited.headers.get('retry-after'))
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `retry-after ${retry}`)
  assert.equal(limited.headers.get('ratelimit-limit'), '200')
  assert.equal(limited.headers.get('ratelimit-remaining'), '0')
  assert.equal(limited.headers.get('ratelimit-reset'), String(retry))
  assert.equal(await stored(a.id), 0, 'the refused request stored nothing')
})

test('rate limit: SERVICE_TRACK_RATE_LIMIT is honoured and tracking has its own counter', async () => {
  const small = await startTestService({ trackRateLimit: 3, apiRateLimit: 100 })
  try {
    const created = await small.account()
    await small.admin('PUT', `/accounts/${created.id}/tracking`, { domains: ['acme.test'] })
    const send = () =>
      created.api('/api/tracker/track', { trackerKey: created.trackerKey, events: [] })
    // Up to 7 requests: even when a minute boundary splits them, two windows of 3 overflow.
    const statuses: number[] = []
    let last
    for (let i = 0; i < 7 && last?.status !== 429; i++) statuses.push((last = await send()).status)
    assert.ok(
      statuses.slice(0, 3).every((st) => st === 200),
      `statuses ${statuses}`,
    )
    assert.equal(last!.status, 429, `statuses ${statuses}`)
    assert.equal(last!.headers.get('ratelimit-limit'), '3')
    // Other API endpoints count in another bucket.
    assert.notEqual((await created.api('/api/v1/uploads/1', undefined, 'GET')).status, 429)
  } finally {
    await small.stop()
  }
})

// ---- applying events ----------------------------------------------------------------------------

// Customers c1 (US, SSO), c2 (DE) and c3; contacts p1 (c1, role user) and q1 (c2, role viewer).
const appliedAccount = async () => {
  const a = await setUpTracking(await scoredAccount(s))
  await upload(a, 'customers', [
    { external_id: 'c1', name: 'One', attributes: { country: 'US', has_sso: true } },
    { external_id: 'c2', name: 'Two', attributes: { country: 'DE' } },
    { external_id: 'c3', name: 'Three' },
  ])
  await upload(a, 'contacts', [
    {
      customer_external_id: 'c1',
      contact_external_id: 'p1',
      contact_name: 'Pat',
      attributes: { role: 'user' },
    },
    {
      customer_external_id: 'c2',
      contact_external_id: 'q1',
      contact_name: 'Quinn',
      attributes: { role: 'viewer' },
    },
  ])
  return a
}
const readCustomer = async (a: Account, id: string) => {
  const res = await a.api(`/api/v1/customer/${id}`, undefined, 'GET')
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}
const contactRow = async (accountId: number, externalId: string) =>
  (
    await s.sql`
    select t.name, t.attributes, c.external_id as customer from contacts t join customers c
      on c.account_id = t.account_id and c.service_id = t.customer_id
    where t.account_id = ${accountId} and t.external_id = ${externalId}`
  )[0]

let applied: Account

test('applying: data.customer updates typed customer attributes only, later events win', async () => {
  applied = await appliedAccount()
  await trackAndApply(applied, [
    ev({
      timestamp: NOW - 3000,
      data: {
        customer: {
          country: 'FR',
          crm_link: 'https://crm.test/1', // a custom and a system attribute
          has_sso: 'yes',
          // wrong types: ignored (a date string that is not a date is a 400: dates.test.ts)
          plan_started: 20260230,
          logins: 5,
          unknown_key: 1, // a metric and an unknown key: ignored
        },
      },
    }),
    // Within a request the event time decides, not the position: NL (later) wins over BE.
    ev({
      timestamp: NOW - 1000,
      identification: { customer: 'c2' },
      data: { customer: { country: 'NL' } },
    }),
    ev({
      timestamp: NOW - 2000,
      identification: { customer: 'c2' },
      data: { customer: { country: 'BE', plan_started: '2025-06-01' } },
    }),
  ])
  const c1 = await readCustomer(applied, 'c1')
  assert.equal(c1.properties.country, 'FR')
  assert.equal(c1.properties.crm_link, 'https://crm.test/1')
  assert.equal(c1.properties.has_sso, true)
  assert.equal(c1.properties.plan_started ?? null, null)
  assert.equal(c1.properties.unknown_key, undefined)
  assert.equal(c1.properties.logins ?? null, null, 'tracking data does not write metrics')
  const c2 = await readCustomer(applied, 'c2')
  assert.equal(c2.properties.country, 'NL')
  assert.equal(
    c2.properties.plan_started,
    '2025-06-01',
    'an older event still sets the keys no later event set',
  )
  // And through search, with filters on the tracked values.
  const search = await applied.api('/api/v1/customers/search', {
    filters: [{ propertyName: 'country', operator: 'IN', values: ['FR', 'NL'] }],
  })
  assert.equal(search.status, 200, JSON.stringify(search.body))
  assert.deepEqual(
    search.body.results.map((r: any) => [r.id, r.properties.country]),
    [
      ['c1', 'FR'],
      ['c2', 'NL'],
    ],
  )
  const contacts = await applied.api('/api/v1/contacts/search', {
    filters: [{ propertyName: 'role', operator: 'EQ', value: 'user' }],
  })
  assert.deepEqual(
    contacts.body.results.map((r: any) => r.id),
    ['p1'],
    'p1 keeps its uploaded role until an event changes it',
  )
})

const olderEventTitle =
  'applying: an older event arriving later does not overwrite newer data; a newer one does; null clears'
test(olderEventTitle, async () => {
  await trackAndApply(applied, [
    ev({
      timestamp: NOW - 1500,
      identification: { customer: 'c2' },
      data: { customer: { country: 'IT' } },
    }),
  ])
  assert.equal((await readCustomer(applied, 'c2')).properties.country, 'NL')
  await trackAndApply(applied, [
    ev({
      timestamp: NOW,
      identification: { customer: 'c2' },
      data: { customer: { country: 'IT', plan_started: null } },
    }),
  ])
  const c2 = await readCustomer(applied, 'c2')
  assert.equal(c2.properties.country, 'IT')
  assert.equal(c2.properties.plan_started ?? null, null)
})

const contactDataTitle =
  'applying: data.contact updates contact attributes and contact_name; ' +
  'an unknown contact of a known customer is created'
test(contactDataTitle, async () => {
  await trackAndApply(applied, [
    ev({
      identification: { customer: 'c1', contact: 'p1' },
      data: { contact: { role: 'admin', contact_name: 'Patricia', unknown: 1 } },
    }),
    ev({
      identification: { customer: 'c1', contact: 'p2' },
      data: { contact: { contact_name: 'Newbie', role: 7 } },
    }),
    ev({ identification: { customer: 'c3', contact: 'p3' } }),
  ])
  const p1 = await contactRow(applied.id, 'p1')
  assert.deepEqual({ ...p1 }, { name: 'Patricia', attributes: { role: 'admin' }, customer: 'c1' })
  const p2 = await contactRow(applied.id, 'p2')
  assert.deepEqual(
    { ...p2 },
    { name: 'Newbie', attributes: {}, customer: 'c1' },
    'created with its name; the wrong-typed role ignored',
  )
  const p3 = await contactRow(applied.id, 'p3')
  assert.deepEqual(
    { ...p3 },
    { name: null, attributes: {}, customer: 'c3' },
    'created without a name when none is given',
  )
  const found = await applied.api('/api/v1/contacts/search', {
    filters: [{ propertyName: 'role', operator: 'EQ', value: 'admin' }],
  })
  assert.deepEqual(
    found.body.results.map((r: any) => [r.id, r.name]),
    [['p1', 'Patricia']],
  )
  const read = await applied.api('/api/v1/customer/c1/contact/p2', undefined, 'GET')
  assert.equal(read.status, 200, JSON.stringify(read.body))
  assert.equal(read.body.name, 'Newbie')
  assert.equal(read.body.customer_external_id, 'c1')
})

test('applying: a contact of another customer is neither moved nor updated', async () => {
  await trackAndApply(applied, [
    ev({
      identification: { customer: 'c1', contact: 'q1' },
      data: { contact: { role: 'admin', contact_name: 'Stolen' } },
    }),
  ])
  assert.deepEqual(
    { ...(await contactRow(applied.id, 'q1')) },
    { name: 'Quinn', attributes: { role: 'viewer' }, customer: 'c2' },
  )
  const [event] = await s.sql`select status, customer_id, contact_id from tracking_events
      where account_id = ${applied.id}
      order by id desc limit 1`
  assert.equal(event.status, 'applied')
  assert.equal(event.contact_id, null)
  assert.notEqual(event.customer_id, null)
})

test('applying: events of an unknown customer are kept, marked unmatched, and create nothing', async () => {
  const [{ customers, contacts }] = await s.sql`
    select (select count(*)::int from customers where account_id = ${applied.id}) as customers,
           (select count(*)::int from contacts where account_id = ${applied.id}) as contacts`
  await trackAndApply(applied, [
    ev({
      identification: { customer: 'nobody', contact: 'px' },
      data: { customer: { country: 'FR' }, contact: { contact_name: 'X' } },
    }),
  ])
  const [event] = await s.sql`select status, customer_id, contact_id, data from tracking_events
      where account_id = ${applied.id}
      and customer_external_id = 'nobody'`
  assert.equal(event.status, 'unmatched')
  assert.equal(event.customer_id, null)
  assert.deepEqual(
    event.data,
    { customer: { country: 'FR' }, contact: { contact_name: 'X' } },
    'the event is kept as sent',
  )
  const [after] = await s.sql`
    select (select count(*)::int from customers where account_id = ${applied.id}) as customers,
           (select count(*)::int from contacts where account_id = ${applied.id}) as contacts`
  assert.deepEqual({ ...after }, { customers, contacts })
})

test('applying: running the job again changes nothing', async () => {
  const state = () => s.sql`
    select 'customer' as kind, external_id, name, attributes, updated_at from customers
      where account_id = ${applied.id}
    union all select 'contact', external_id, name, attributes, updated_at from contacts
      where account_id = ${applied.id}
    union all select status, id::text, name, data, received_at from tracking_events
      where account_id = ${applied.id}
    order by 1, 2`
  const before = await state()
  const again = await s.sql.begin((tx) => applyEvents(tx, applied.id))
  assert.deepEqual(again, { events: 0, customers: 0, contactsCreated: 0, contacts: 0 })
  assert.deepEqual(await state(), before)
})

test('applying: jobs of one account that run at once apply each event exactly once', async () => {
  // graphile-worker 0.17 with a localQueue can run two jobs of one named queue together
  // (graphile/worker#621). The events are written here without a job, then applied by four
  // concurrent transactions.
  const a = await setUpTracking(await scoredAccount(s))
  await upload(
    a,
    'customers',
    Array.from({ length: 20 }, (_, i) => ({ external_id: `c${i}`, name: `C${i}` })),
  )
  const events = Array.from({ length: 400 }, (_, i) =>
    ev({
      timestamp: NOW - i,
      identification: { customer: `c${i % 25}`, contact: `p${i % 40}` },
      data: { customer: { country: `X${i}` }, contact: { contact_name: `N${i}`, role: `r${i}` } },
    }),
  )
  await s.sql`
    insert into tracking_events (account_id, name, occurred_at, customer_external_id,
      contact_external_id, data)
    select ${a.id}, x->>'name', to_timestamp((x->>'timestamp')::float8 / 1000),
      x#>>'{identification,customer}',
      x#>>'{identification,contact}', x->'data'
    from jsonb_array_elements(${JSON.stringify(events)}::text::jsonb) x`
  const runs = await Promise.all(
    Array.from({ length: 4 }, () => s.sql.begin((tx) => applyEvents(tx, a.id))),
  )
  assert.equal(
    runs.reduce((n, r) => n + r.events, 0),
    400,
    JSON.stringify(runs),
  )
  assert.equal(
    runs.reduce((n, r) => n + r.contactsCreated, 0),
    40,
    'each contact is created once',
  )
  const [{ applied, unmatched }] = await s.sql`
    select count(*) filter (where status = 'applied')::int as applied,
      count(*) filter (where status =
      'unmatched')::int as unmatched
    from tracking_events where account_id = ${a.id}`
  assert.deepEqual({ applied, unmatched }, { applied: 320, unmatched: 80 })
  // The latest event of c0 is i = 0 (NOW): its values won.
  assert.equal((await readCustomer(a, 'c0')).properties.country, 'X0')
})

test('intake: a request adds an apply job only when its account has none waiting', async () => {
  // No worker here, so the jobs stay where the intake leaves them.
  const q = await startTestService({}, { http: true, worker: false })
  try {
    const a = await q.account()
    await q.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
    const send = async () =>
      assert.equal(
        (await a.api('/api/tracker/track', { trackerKey: a.trackerKey, events: [ev(), ev()] }))
          .status,
        200,
      )
    const jobs = () => q.sql`
      select j.key, j.locked_at is not null as locked, j.payload, q.queue_name
        from graphile_worker._private_jobs j
        join graphile_worker._private_tasks t on t.id = j.task_id left
          join graphile_worker._private_job_queues q
          on q.id = j.job_queue_id
      where t.identifier = 'apply_events' order by j.id`
    await send()
    await send()
    const waiting = await jobs()
    assert.deepEqual(
      waiting.map((j) => ({ ...j })),
      [
        {
          key: `apply_events:${a.id}`,
          locked: false,
          payload: { account_id: a.id },
          queue_name: `account:${a.id}`,
        },
      ],
    )
    // A job a worker has taken no longer counts as waiting: the next request adds another.
    await q.sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'test'
      where key = ${`apply_events:${a.id}`}`
    await send()
    assert.deepEqual(
      (await jobs()).map((j) => [j.key, j.locked]),
      [
        [null, true],
        [`apply_events:${a.id}`, false],
      ],
    )
    // An empty request adds nothing; the waiting job applies everything received so far.
    assert.equal(
      (await a.api('/api/tracker/track', { trackerKey: a.trackerKey, events: [] })).status,
      200,
    )
    assert.equal((await jobs()).length, 2)
    const done = await q.sql.begin((tx) => applyEvents(tx, a.id))
    assert.equal(done.events, 6)
  } finally {
    await q.stop()
  }
})

// An intake that found the job waiting added none: the job, once taken, must see its rows. The job
// passes the intake's gate first, so it waits for every intake still in flight.
test('intake: an apply job waits at the gate for the intakes in flight, then reads what they stored', async () => {
  const q = await startTestService({}, { http: true, worker: false })
  try {
    const a = await q.account()
    let release = () => {}
    const held = new Promise<void>((r) => (release = r))
    let stored = false
    // The intake holds the gate once its statement has answered: the lock is sent before it, on its
    // connection (a pool still opening its connections could otherwise let the job look first).
    let ran = () => {}
    const inFlight = new Promise<void>((r) => (ran = r))
    const intake = throughGate(q.app, TASKS.applyEvents, a.id, async (tx) => {
      const rows = await tx`
        insert into tracking_events (account_id, name, occurred_at, customer_external_id)
        values (${a.id}, 'login', now(), 'c1') returning id`
      ran()
      await held
      stored = true
      return rows
    })
    await inFlight
    let passedWhileHeld: boolean | null = null
    const job = passGate(q.app, TASKS.applyEvents, a.id).then(() => (passedWhileHeld = !stored))
    await new Promise((r) => setTimeout(r, 300))
    assert.equal(passedWhileHeld, null, 'the job waits while the intake is in flight')
    release()
    await Promise.all([intake, job])
    assert.equal(passedWhileHeld, false)
    const [{ n }] = await q.sql`
      select count(*)::int as n from tracking_events where account_id = ${a.id}
        and status = 'received'`
    assert.equal(n, 1, 'committed before the job read')
    // Another account's intake does not hold this account's job.
    const b = await q.account()
    let otherDone = false
    let releaseOther = () => {}
    const otherHeld = new Promise<void>((r) => (releaseOther = r))
    let otherRan = () => {}
    const otherInFlight = new Promise<void>((r) => (otherRan = r))
    const other = throughGate(q.app, TASKS.applyEvents, b.id, async (tx) => {
      const rows = await tx`select 1`
      otherRan()
      await otherHeld
      return rows
    }).then(() => (otherDone = true))
    await otherInFlight
    // Raced against a timeout, so that a gate shared by the accounts fails here rather than hangs.
    const passed = await Promise.race([
      passGate(q.app, TASKS.applyEvents, a.id).then(() => !otherDone),
      new Promise<string>((r) => setTimeout(() => r('still waiting after 2 s'), 2000)),
    ])
    releaseOther()
    await other
    assert.equal(passed, true, 'the gate is per account')
  } finally {
    await q.stop()
  }
})

const boundedBatchesTitle =
  'applying: a job applies a bounded number of batches, then queues its successor behind the waiting jobs'
test(boundedBatchesTitle, async () => {
  const q = await startTestService({}, { http: true, worker: false })
  try {
    const a = await q.account()
    const backlog = EVENTS_PER_BATCH * BATCHES_PER_JOB + 1
    await q.sql`
      insert into tracking_events (account_id, name, occurred_at, customer_external_id, data)
      select ${a.id}, 'login', now(), 'c' || i, null from generate_series(1, ${backlog}) i`
    // An upload's job already waits on the account's queue.
    await q.sql`select graphile_worker.add_job('process_upload', '{}'::json,
      queue_name => ${`account:${a.id}`})`
    const run = (payload: { account_id: number }, _: never) => applyEventsOfAccount(q.app, payload)
    const received = async () =>
      (
        await q.sql`select count(*)::int as n from tracking_events where account_id = ${a.id}
          and status = 'received'`
      )[0].n
    const queued = () => q.sql`
      select t.identifier as task, j.key from graphile_worker._private_jobs j
        join graphile_worker._private_tasks t
        on t.id = j.task_id
      where j.job_queue_id = (select id from graphile_worker._private_job_queues
        where queue_name = ${`account:${a.id}`})
      order by j.id`

    await run({ account_id: a.id }, undefined as never)
    assert.equal(await received(), 1)
    assert.deepEqual(
      (await queued()).map((j) => [j.task, j.key]),
      [
        ['process_upload', null],
        ['apply_events', `apply_events:${a.id}`],
      ],
    )
    await run({ account_id: a.id }, undefined as never)
    assert.equal(await received(), 0)
    assert.equal(
      (await queued()).length,
      2,
      'a job that finds the backlog drained queues no successor',
    )
  } finally {
    await q.stop()
  }
})

test('admin: count and list recent events of a customer, newest first (API and CLI)', async () => {
  const a = await setUpTracking(await s.account())
  await trackAndApply(a, [
    ev({ name: 'first', timestamp: NOW - 3000 }),
    ev({
      name: 'third',
      timestamp: NOW - 1000,
      identification: { customer: 'c1', contact: 'p1' },
      data: { contact: { role: 'x' } },
    }),
    ev({ name: 'second', timestamp: NOW - 2000 }),
    ev({ name: 'other', identification: { customer: 'c9' } }),
  ])
  const res = await s.admin('GET', `/accounts/${a.id}/events?customer=c1&limit=2`)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  assert.equal(res.body.count, 3)
  assert.deepEqual(
    res.body.by_status,
    { received: 0, applied: 0, unmatched: 3 },
    'c1 does not exist in this account',
  )
  assert.deepEqual(
    res.body.events.map((e: any) => e.name),
    ['third', 'second'],
  )
  assert.equal(res.body.events[0].timestamp, NOW - 1000)
  assert.deepEqual(res.body.events[0].identification, { customer: 'c1', contact: 'p1' })
  assert.deepEqual(res.body.events[0].data, { contact: { role: 'x' } })
  const all = await s.admin('GET', `/accounts/${a.id}/events`)
  assert.equal(all.body.count, 4)
  assert.deepEqual(
    all.body.events.map((e: any) => e.name),
    ['other', 'third', 'second', 'first'],
  )
  for (const limit of ['0', '1001', 'x'])
    assert.equal((await s.admin('GET', `/accounts/${a.id}/events?limit=${limit}`)).status, 400)
  assert.equal((await s.admin('GET', '/accounts/999999/events')).status, 404)
  const { stdout } = await cli([
    'admin',
    'list-events',
    '--id',
    String(a.id),
    '--customer',
    'c1',
    '--limit',
    '1',
  ])
  const printed = JSON.parse(stdout)
  assert.equal(printed.count, 3)
  assert.deepEqual(
    printed.events.map((e: any) => e.name),
    ['third'],
  )
})

// ---- no webhook ---------------------------------------------------------------------------------

test('tracking sends no webhook, not even for the contacts it creates', async () => {
  const received: string[] = []
  const receiver = createServer((req, res) => {
    received.push(req.url ?? '')
    req.resume()
    res.end()
  })
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()))
  try {
    const a = await setUpTracking(await scoredAccount(s))
    const port = (receiver.address() as { port: number }).port
    const hook = await s.admin('POST', `/accounts/${a.id}/webhooks`, {
      url: `http://127.0.0.1:${port}/hook`,
      events: ['customer.created'],
    })
    assert.equal(hook.status, 201, JSON.stringify(hook.body))
    await upload(a, 'customers', [{ external_id: 'c1', name: 'One' }])
    const deliveries = async () =>
      (await s.sql`select count(*)::int as n from webhook_deliveries where account_id = ${a.id}`)[0]
        .n as number
    // The control: a new customer through an upload does fire the webhook (the outbox row).
    const control = await deliveries()
    assert.ok(control >= 1, 'the upload of a new customer wrote a webhook delivery')
    await trackAndApply(a, [
      ev({
        identification: { customer: 'c1', contact: 'new-contact' },
        data: { contact: { contact_name: 'New' } },
      }),
      ev({ identification: { customer: 'brand-new-customer' } }),
    ])
    assert.ok(await contactRow(a.id, 'new-contact'), 'the contact was created')
    const receivedBefore = received.length
    await sleep(500)
    assert.equal(await deliveries(), control, 'tracking wrote no delivery')
    assert.equal(received.length, receivedBefore, 'the receiver heard nothing from tracking')
    assert.ok(received.every((url) => url === '/hook'))
  } finally {
    receiver.close()
  }
})

// ---- aggregation --------------------------------------------------------------------------------

const run = promisify(execFile)
const cli = (args: string[]) =>
  run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    env: { ...process.env, DATABASE_URL: s.url, LOG_LEVEL: 'silent' },
  })

const aggregationTitle =
  "aggregation: event counts of the last 30 days become today's metric values, then the records are scored"
test(aggregationTitle, async () => {
  const a = await setUpTracking(await scoredAccount(s))
  const define = (entity: string, codename: string, type = 'number') =>
    s.admin('POST', `/accounts/${a.id}/properties`, { entity, kind: 'metric', codename, type })
  await define('customer', 'page_view')
  await define('contact', 'page_view')
  // named like an event but not a number: untouched
  await define('customer', 'signup_source', 'string')
  const yesterday = new Date(NOW - DAY).toISOString().slice(0, 10)
  await upload(a, 'customers', [
    { external_id: 'c1', name: 'One', metrics: [{ date: today, seats: 10 }] },
    { external_id: 'c2', name: 'Two', metrics: [{ date: yesterday, logins: 5 }] },
    { external_id: 'c3', name: 'Three' },
  ])
  await upload(a, 'contacts', [
    { customer_external_id: 'c1', contact_external_id: 'p1', contact_name: 'P1' },
    { customer_external_id: 'c1', contact_external_id: 'p2', contact_name: 'P2' },
  ])
  const at = (customer: string, contact: string | undefined, name: string, ago: number) =>
    ev({ name, timestamp: NOW - ago, identification: { customer, ...(contact && { contact }) } })
  await trackAndApply(a, [
    at('c1', undefined, 'logins', DAY),
    at('c1', 'p1', 'logins', 2 * DAY),
    at('c1', undefined, 'logins', 29 * DAY),
    at('c1', undefined, 'logins', 31 * DAY), // older than 30 days
    at('c1', 'p1', 'page_view', 1000),
    at('c1', 'p1', 'page_view', 2000),
    at('c1', 'p2', 'page_view', 3000),
    at('c1', undefined, 'page_view', 4000),
    at('c1', 'p1', 'sessions', 1000),
    at('c1', 'p1', 'sessions', DAY), // a contact metric only
    at('c1', undefined, 'signup_source', 1000),
    // c2's only logins event has aged out: its value drops to 0
    at('c2', undefined, 'logins', 40 * DAY),
    at('nobody', undefined, 'logins', 1000),
    at('nobody', undefined, 'logins', 2000), // unmatched: counted nowhere
  ])
  const { stdout } = await cli(['count-events', '--account', String(a.id)])
  assert.deepEqual(JSON.parse(stdout), { account_id: a.id, customers: 2, contacts: 2 })

  const snapshots = async () =>
    Object.fromEntries(
      (
        await s.sql`
    select c.external_id, s."values" from customer_snapshots s
      join customers c on c.account_id = s.account_id and c.service_id = s.customer_id
    where s.account_id = ${a.id} and s.date = ${today}
    union all
    select t.external_id, s."values" from contact_snapshots s
      join contacts t on t.account_id = s.account_id and t.service_id = s.contact_id
    where s.account_id = ${a.id} and s.date = ${today}`
      ).map((r) => [r.external_id, r.values]),
    )
  const expected = {
    c1: { seats: 10, logins: 3, page_view: 4 }, // merged into the snapshot the upload wrote today
    c2: { logins: 0 },
    p1: { sessions: 2, page_view: 2 },
    p2: { page_view: 1 },
  }
  assert.deepEqual(
    await snapshots(),
    expected,
    'c3 has no events and no value to reset: no snapshot',
  )
  const metrics = Object.fromEntries(
    (
      await s.sql`
    select external_id, metrics from customers where account_id = ${a.id}
    union all select external_id, metrics from contacts where account_id = ${a.id}`
    ).map((r) => [r.external_id, r.metrics]),
  )
  assert.deepEqual(metrics, { ...expected, c3: {} }, "the records' latest metrics are refreshed")

  // Then the records are scored: 3 logins on the customer model's 0..40 scale give
  // -100 + 200 * 3 / 40 = -85; p1's 2 sessions on the contact model's 0..20 give -80.
  const deadline = Date.now() + 30_000
  const scores = async () => [
    (await readCustomer(a, 'c1')).engagementscore,
    (await a.api('/api/v1/customer/c1/contact/p1', undefined, 'GET')).body.engagementscore,
  ]
  while ((await scores()).join() !== '-85,-80' && Date.now() < deadline) await sleep(100)
  assert.deepEqual(await scores(), [-85, -80])
  assert.equal((await readCustomer(a, 'c1')).last_seen, today)

  // The daily run goes through the queue (no account_id: one job per account) and is idempotent.
  await s.sql`select graphile_worker.add_job('aggregate_events', '{}'::json)`
  const queued = Date.now() + 30_000
  while (
    (await s.sql`select 1 from graphile_worker.jobs where task_identifier = 'aggregate_events'`)
      .length &&
    Date.now() < queued
  )
    await sleep(100)
  assert.deepEqual(await snapshots(), expected)
})

test('aggregation: the daily cron line is registered with the worker', async () => {
  const [row] = await s.sql`select identifier from graphile_worker._private_known_crontabs
      where identifier = 'aggregate_events'`
  assert.ok(row, 'graphile-worker knows the aggregate_events crontab')
})

// ---- the SQL twin of fitsType -------------------------------------------------------------------

test('fits_type (SQL) agrees with fitsType (TypeScript) on generated values', async () => {
  const digits = (n: number) =>
    fc
      .array(fc.constantFrom(...'0123456789'), { minLength: n, maxLength: n })
      .map((d) => d.join(''))
  const dateLike = fc
    .tuple(fc.constantFrom('0000', '1999', '2000', '2024', '2100', '9999'), digits(2), digits(2))
    .map(([y, m, d]) => `${y}-${m}-${d}`)
  const value = fc.oneof(
    dateLike,
    fc.constantFrom(
      '2024-02-29',
      '2023-02-29',
      '0000-02-29',
      '2024-04-31',
      '2024-1-01',
      ' 2024-01-01',
    ),
    fc.string(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.integer(), { maxLength: 2 }),
    fc.dictionary(fc.string(), fc.integer(), { maxKeys: 2 }),
  )
  const cases = fc.sample(
    fc.tuple(value, fc.constantFrom<PropertyType>('string', 'number', 'boolean', 'date')),
    3000,
  )
  const rows = await s.sql`
    select fits_type(v::jsonb, t) as fits
    from unnest(${cases.map(([v]) => JSON.stringify(v))}::text[],
      ${cases.map(([, t]) => t)}::text[])
      with ordinality as x(v, t, i) order by i`
  const disagreements = cases.filter(([v, t], i) => fitsType(v, t) !== rows[i].fits)
  assert.deepEqual(disagreements, [])
})
