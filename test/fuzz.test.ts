import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { startTestService, ADMIN_TOKEN, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'

let s: TestService
let account: Awaited<ReturnType<typeof scoredAccount>>
before(async () => {
  s = await startTestService(
    { apiRateLimit: 1_000_000, trackRateLimit: 1_000_000 },
    { http: true, worker: false },
  )
  account = await scoredAccount(s)
  await s.admin('PUT', `/accounts/${account.id}/tracking`, { domains: ['acme.test'] })
  await s.api(account.token)('/api/v1/customer', { external_id: 'known', name: 'Known' })
})
after(() => s.stop())

const ENDPOINTS: [string, string][] = [
  ['POST', '/api/v1/customers'],
  ['POST', '/api/v1/contacts'],
  ['POST', '/api/v1/customers/search'],
  ['POST', '/api/v1/contacts/search'],
  ['POST', '/api/tracker/track'],
  ['POST', '/api/v1/customer'],
  ['PUT', '/api/v1/customer/known'],
  ['POST', '/api/v1/customer/known/contact'],
  ['GET', '/api/v1/uploads/1'],
  ['POST', '/admin/v1/accounts'],
  ['POST', '/admin/v1/accounts/1/properties'],
  ['PUT', '/admin/v1/accounts/1/scoring'],
  ['POST', '/admin/v1/accounts/1/webhooks'],
  ['POST', '/admin/v1/accounts/1/keys'],
]

const stored = async () =>
  JSON.stringify(
    await s.sql`
  select (select count(*) from uploads) as u, (select count(*) from customers) as c,
    (select count(*)
    from contacts) as p,
         (select count(*) from tracking_events) as e, (select count(*) from property_defs) as d,
           (select count(*)
           from accounts) as a,
         (select count(*) from webhooks) as w, (select count(*) from api_keys) as k`,
  )

const hostileKey = fc.constantFrom(
  '__proto__',
  'constructor',
  'prototype',
  "'; drop table customers; --",
  '"quoted"',
  'a\u0000b',
  '$1',
  '../..',
  'date',
  'logins',
  'country',
)
const hostileString = fc.oneof(
  fc.string(),
  fc.constantFrom(
    "' or 1=1 --",
    '%',
    '_',
    '\\',
    '\u0000',
    'null',
    'true',
    '2026-02-30',
    '1e999',
    'NaN',
  ),
  fc.integer({ min: 0, max: 200_000 }).map((n) => 'x'.repeat(n)),
)
const value = fc.letrec((tie) => ({
  any: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    hostileString,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('any'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(hostileKey, fc.string()), tie('any'), { maxKeys: 5 }),
  ),
})).any
// Bodies shaped like the real ones, with fields of random type, plus plain random JSON.
const body = fc.oneof(
  value,
  fc.record({
    customers: fc.array(
      fc.dictionary(
        fc.oneof(
          hostileKey,
          fc.constantFrom('external_id', 'name', 'owner_email', 'attributes', 'metrics'),
        ),
        value,
        { maxKeys: 6 },
      ),
      { maxLength: 3 },
    ),
  }),
  fc.record(
    {
      filters: fc.array(
        fc.record(
          {
            propertyName: fc.oneof(hostileKey, hostileString),
            operator: fc.oneof(fc.constantFrom('EQ', 'LIKE', 'IN', 'GTD', 'KNOWN'), hostileString),
            value: value,
            values: value,
          },
          { requiredKeys: [] },
        ),
        { maxLength: 11 },
      ),
      limit: value,
      after: value,
      properties: value,
    },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      trackerKey: fc.oneof(hostileString, fc.constant('x')),
      events: fc.array(
        fc.record(
          { name: value, timestamp: value, identification: value, data: value },
          { requiredKeys: [] },
        ),
        { maxLength: 3 },
      ),
    },
    { requiredKeys: [] },
  ),
)
const raw = fc.oneof(
  body.map((b) => JSON.stringify(b) ?? 'null'),
  fc.string(),
  fc.integer({ min: 1, max: 50_000 }).map((n) => '['.repeat(n)),
  fc.integer({ min: 1, max: 20_000 }).map((n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)),
  fc.constant(
    '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}',
  ),
)
const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/problem+json',
  '',
  'application/json; charset=latin1',
)
const auth = fc.constantFrom('key', 'none', 'garbage', 'admin')

const hostileRequestsTitle =
  'hostile requests to every endpoint get 4xx Problem Details (or 2xx), never 5xx, never a hang, ' +
  'and a refusal stores nothing'
test(hostileRequestsTitle, async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...ENDPOINTS),
      raw,
      contentType,
      auth,
      async ([method, path], payload, type, who) => {
        const headers: Record<string, string> = {}
        if (type) headers['content-type'] = type
        if (who === 'key') headers['service-key'] = account.token
        if (who === 'garbage') headers['service-key'] = "sk_1_' or 1=1 --"
        if (who === 'admin') headers.authorization = `Bearer ${ADMIN_TOKEN}`
        const before = await stored()
        const res = await fetch(s.base + path.replace('/accounts/1', `/accounts/${account.id}`), {
          method,
          headers,
          body: method === 'GET' ? undefined : payload,
          signal: AbortSignal.timeout(15_000),
        })
        const text = await res.text()
        assert.ok(
          res.status < 500,
          `${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`,
        )
        if (res.status >= 400) {
          assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/)
          const problem = JSON.parse(text)
          assert.equal(problem.status, res.status)
          assert.equal(typeof problem.detail, 'string')
          assert.doesNotMatch(text, /at \w+ \(|node_modules|PostgresError/)
          // Plain sentences only, never the validation library's "Invalid type: Expected
          // ... but received ...".
          for (const e of problem.errors ?? [])
            assert.doesNotMatch(e.message, /Invalid (type|key|length|value)|but received/)
          if (res.status === 400)
            assert.ok(problem.errors?.length > 0, 'a 400 names where the request is wrong')
          assert.equal(await stored(), before, 'a refused request stored something')
        }
        assert.equal(
          ({} as Record<string, unknown>).polluted,
          undefined,
          'Object.prototype was polluted',
        )
      },
    ),
    { numRuns: Number(process.env.FUZZ_RUNS ?? 300) },
  )
})

// Bodies valid in every respect but one string, so the hostile text reaches the deepest layers
// (typed checks, the merge, jsonb, the search compiler) instead of failing the shape first.
const nasty = fc.oneof(
  hostileString,
  fc.constantFrom(
    '\ud800',
    'x\udc00',
    '\udbff\udfff',
    'a\u0000',
    '\u0000'.repeat(3),
    '\uffff',
    '\u2028',
    "'; drop table customers; --",
  ),
)
const wellShaped = fc.oneof(
  fc.record({
    path: fc.constant('/api/v1/customers'),
    body: fc
      .record({ external_id: nasty, name: nasty, owner_email: nasty, country: nasty })
      .map(({ external_id, name, owner_email, country }) => ({
        customers: [
          {
            external_id,
            name,
            owner_email,
            attributes: { country },
            metrics: [{ date: '2026-01-01', logins: 1 }],
          },
        ],
      })),
  }),
  fc.record({
    path: fc.constant('/api/v1/customer'),
    body: fc.record({ external_id: nasty, name: nasty }),
  }),
  fc.record({
    path: fc.constant('/api/v1/contacts'),
    body: fc
      .record({ customer_external_id: nasty, contact_external_id: nasty, contact_name: nasty })
      .map((c) => ({ contacts: [c] })),
  }),
  fc.record({
    path: fc.constant('/api/v1/customers/search'),
    body: fc
      .record({
        propertyName: fc.constantFrom('name', 'country', 'owner', 'tags', 'logins', 'last_seen'),
        operator: fc.constantFrom('EQ', 'NEQ', 'LIKE', 'IN', 'GT', 'GTD'),
        value: nasty,
      })
      .map((f) => ({ filters: [f] })),
  }),
  fc.record({
    path: fc.constant('/api/tracker/track'),
    body: fc
      .record({ name: nasty, customer: nasty, plan: nasty })
      .map(({ name, customer, plan }) => ({
        trackerKey: account.trackerKey,
        events: [
          {
            name,
            timestamp: Date.now(),
            identification: { customer },
            data: { customer: { country: plan } },
          },
        ],
      })),
  }),
  fc.record({ path: fc.constant('/admin/v1/accounts'), body: fc.record({ name: nasty }) }),
  fc.record({
    path: fc.constant('/admin/v1/accounts/1/users'),
    body: fc.record({ email: nasty, name: nasty }),
  }),
  fc.record({ path: fc.constant('/admin/v1/accounts/1/tags'), body: fc.record({ title: nasty }) }),
  fc.record({
    path: fc.constant('/admin/v1/accounts/1/webhooks'),
    body: fc.record({
      name: nasty,
      url: nasty.map((x) => `https://hooks.example.com/${x}`),
      events: fc.constant(['customer.created']),
    }),
  }),
  fc.record({
    path: fc.constant('/admin/v1/accounts/1/tracking'),
    method: fc.constant('PUT'),
    body: fc.record({ domains: fc.array(nasty, { minLength: 1, maxLength: 2 }) }),
  }),
  fc.record({
    path: fc.constant('/admin/v1/accounts/1/customers/known/tags'),
    method: fc.constant('PUT'),
    body: fc.record({ titles: fc.array(nasty, { maxLength: 2 }) }),
  }),
)

const hostileStringsTitle =
  'well-shaped requests with hostile strings in every string field: never 5xx, a refusal stores nothing'
test(hostileStringsTitle, async () => {
  await fc.assert(
    fc.asyncProperty(
      wellShaped,
      async ({
        path,
        body: payload,
        method = 'POST',
      }: {
        path: string
        body: unknown
        method?: string
      }) => {
        const before = await stored()
        const who: Record<string, string> = path.startsWith('/admin')
          ? { authorization: `Bearer ${ADMIN_TOKEN}` }
          : { 'service-key': account.token }
        const res = await fetch(s.base + path.replace('/accounts/1/', `/accounts/${account.id}/`), {
          method,
          headers: { 'content-type': 'application/json', ...who },
          body: JSON.stringify(payload),
          signal: AbortSignal.timeout(15_000),
        })
        const text = await res.text()
        assert.ok(res.status < 500, `${path} answered ${res.status}: ${text.slice(0, 300)}`)
        if (res.status >= 400)
          assert.equal(
            await stored(),
            before,
            `a refused request stored something: ${text.slice(0, 300)}`,
          )
      },
    ),
    { numRuns: Number(process.env.FUZZ_RUNS ?? 300) },
  )
})

test('hostile headers: huge, repeated or odd service-key and content-type values are refused cleanly', async () => {
  for (const key of [
    '',
    ' ',
    'x'.repeat(8000),
    'sk_',
    'sk_0_' + 'a'.repeat(43),
    `sk_${account.id}_${'a'.repeat(500)}`,
    'sk_99999999999999999999_' + 'a'.repeat(43),
  ]) {
    const res = await fetch(s.base + '/api/v1/customers/search', {
      method: 'POST',
      headers: { 'service-key': key, 'content-type': 'application/json' },
      body: '{}',
    })
    assert.ok([401, 403].includes(res.status), `key ${key.slice(0, 20)}: ${res.status}`)
  }
  const huge = await fetch(s.base + '/healthz', { headers: { 'x-big': 'y'.repeat(20_000) } }).catch(
    () => null,
  )
  assert.ok(huge === null || huge.status === 431 || huge.status === 200)
})
