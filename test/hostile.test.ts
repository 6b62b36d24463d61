// A hostile-input corpus replayed against every endpoint group: hostile path and query values on
// every route of the routing table, bodies that are not UTF-8 or not declared as such, oversized
// values, dates PostgreSQL cannot hold, and hostile strings in well-shaped bodies. Asserted: no
// 5xx; every 4xx is Problem Details, and every 400 names a path; no message in the validation
// library's own phrasing; and no request answered 200 is followed by a failed or stuck job.
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { routes } from '../src/api/routes.ts'
import { scoredAccount, waitForUpload } from './helpers/fixtures.ts'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let a: Awaited<ReturnType<typeof scoredAccount>>
// The route walk runs on an account of its own: its bodies ({}) reset settings such as the model.
let walk: Awaited<ReturnType<TestService['account']>>
before(async () => {
  s = await startTestService({ apiRateLimit: 1_000_000, trackRateLimit: 1_000_000 })
  a = await scoredAccount(s)
  await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
  await a.api('/api/v1/customer', { external_id: 'known', name: 'Known' })
  walk = await s.account('Walk')
})
after(() => s.stop())

interface Answer {
  status: number
  type: string
  body: any
  text: string
}

// Raw bytes on the wire: fetch would refuse or re-encode some of these paths and bodies.
const send = (method: string, path: string, headers: Record<string, string>, body?: Buffer | string) =>
  new Promise<Answer>((resolve, reject) => {
    const url = new URL(s.base)
    const req = request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let parsed: unknown
        try {
          parsed = JSON.parse(text)
        } catch {
          parsed = undefined
        }
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body: parsed, text })
      })
    })
    req.on('error', reject)
    req.end(body)
  })

const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` }
const authFor = (route: (typeof routes)[number]): Record<string, string> =>
  route.auth === 'admin' ? ADMIN : route.auth === 'none' ? {} : { 'service-key': walk.token }

// What the library would say on its own: "Invalid type: Expected string but received 5".
const LIBRARY_PHRASING = /Invalid (type|key|length|value|format|entry)|Expected .* but received|Received /

const answered: { what: string; answer: Answer }[] = []
const check = (what: string, answer: Answer) => {
  answered.push({ what, answer })
  assert.ok(answer.status < 500, `${what}: ${answer.status} ${answer.text.slice(0, 300)}`)
  if (answer.status >= 400) {
    assert.match(answer.type, /^application\/problem\+json/, what)
    assert.equal(answer.body.status, answer.status, what)
    assert.equal(typeof answer.body.detail, 'string', what)
    assert.doesNotMatch(answer.text, /at \w+ \(|node_modules|PostgresError/, what)
  }
  if (answer.status === 400) {
    assert.ok(Array.isArray(answer.body.errors) && answer.body.errors.length > 0, `${what}: no errors`)
    for (const e of answer.body.errors) {
      assert.equal(typeof e.path, 'string', what)
      assert.doesNotMatch(e.message, LIBRARY_PHRASING, `${what}: ${e.message}`)
    }
  }
  return answer
}

const HOSTILE_SEGMENTS = [
  '%00',
  'a%00b',
  '%C3%28',
  '%FF',
  '%ED%A0%80',
  'x'.repeat(5000),
  '%25',
  '..',
  '%2F',
  '-1',
  '0',
  '1e3',
]
const HOSTILE_QUERIES = [
  '?customer=%00',
  '?user_email=%FF',
  '?limit=%00',
  '?limit=9999999999999999999',
  '?%00=1',
  '?customer=a&customer=b',
]

test('every route with hostile path and query values: never a 5xx', async () => {
  for (const route of routes) {
    const names = [...route.path.matchAll(/:(\w+)/g)].map((m) => m[1])
    const paths = names.length
      ? HOSTILE_SEGMENTS.map((seg) => route.path.replace(/:(\w+)/g, (_, n) => (n === 'id' ? String(walk.id) : seg)))
      : [route.path]
    if (names.length > 1 || (names.length === 1 && names[0] !== 'id')) paths.push(route.path.replace(/:(\w+)/g, '%00'))
    for (const path of paths) {
      for (const query of ['', ...HOSTILE_QUERIES]) {
        const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : '{}'
        const headers = { ...authFor(route), ...(body && { 'content-type': 'application/json' }) }
        check(`${route.method} ${path.slice(0, 80)}${query}`, await send(route.method, path + query, headers, body))
      }
    }
  }
})

test('a NUL or invalid UTF-8 in a path id is a 404, in a query value a 400 naming it', async () => {
  for (const id of ['%00', 'a%00b', '%C3%28', '%FF']) {
    const res = check(id, await send('GET', `/api/v1/customer/${id}`, { 'service-key': a.token }))
    assert.equal(res.status, 404, id)
  }
  const res = check('events', await send('GET', `/admin/v1/accounts/${a.id}/events?customer=%00`, ADMIN))
  assert.equal(res.status, 400)
  assert.deepEqual(
    res.body.errors.map((e: { path: string }) => e.path),
    ['/query/customer'],
  )
  const mail = check(
    'notifications',
    await send('GET', `/admin/v1/accounts/${a.id}/notifications?user_email=%FF`, ADMIN),
  )
  assert.equal(mail.status, 400)
})

// Invalid UTF-8 sequences: a lone continuation byte's lead, an invalid byte, an encoded surrogate,
// an overlong slash, a truncated four-byte sequence.
const INVALID_UTF8 = ['c328', 'ff', 'eda080', 'c0af', 'f0288cbc', 'e282']
const bodyWith = (hex: string, json: (x: string) => string) => {
  const [head, tail] = json('@@BYTES@@').split('@@BYTES@@')
  return Buffer.concat([Buffer.from(head), Buffer.from(hex, 'hex'), Buffer.from(tail)])
}

test('bodies that are not valid UTF-8 are a 400, and nothing is stored', async () => {
  const key = { 'service-key': a.token, 'content-type': 'application/json' }
  const cases: [string, (x: string) => string, Record<string, string>][] = [
    ['/api/v1/customers', (x) => JSON.stringify({ customers: [{ external_id: `u${x}`, name: 'U' }] }), key],
    [
      '/api/v1/customers/search',
      (x) => JSON.stringify({ filters: [{ propertyName: 'name', operator: 'EQ', value: x }] }),
      key,
    ],
    [
      '/api/tracker/track',
      (x) =>
        JSON.stringify({
          trackerKey: a.trackerKey,
          events: [
            {
              name: 'e',
              timestamp: Date.now(),
              identification: { customer: 'known' },
              data: { customer: { country: x } },
            },
          ],
        }),
      key,
    ],
    [
      `/admin/v1/accounts/${a.id}/tags`,
      (x) => JSON.stringify({ title: `t${x}` }),
      { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    ],
  ]
  const [{ before }] = await s.sql`select (select count(*) from uploads) + (select count(*) from tracking_events)
    + (select count(*) from tags) as before`
  for (const [path, json, headers] of cases) {
    for (const hex of INVALID_UTF8) {
      const res = check(`${path} ${hex}`, await send('POST', path, headers, bodyWith(hex, json)))
      assert.equal(res.status, 400, `${path} ${hex}`)
      assert.match(res.body.detail, /UTF-8/)
    }
  }
  const [{ after: now }] = await s.sql`select (select count(*) from uploads) + (select count(*) from tracking_events)
    + (select count(*) from tags) as after`
  assert.equal(now, before)
})

test('a declared charset other than UTF-8 is a 415, or a 406 on uploads and single-record writes', async () => {
  const latin1 = (headers: Record<string, string>) => ({
    ...headers,
    'content-type': 'application/json; charset=latin1',
  })
  const key = { 'service-key': a.token }
  assert.equal(check('search', await send('POST', '/api/v1/customers/search', latin1(key), '{}')).status, 415)
  assert.equal(check('track', await send('POST', '/api/tracker/track', latin1(key), '{}')).status, 415)
  assert.equal(check('upload', await send('POST', '/api/v1/customers', latin1(key), '{}')).status, 406)
  assert.equal(check('create', await send('POST', '/api/v1/customer', latin1(key), '{}')).status, 406)
  const admin = latin1({ authorization: `Bearer ${ADMIN_TOKEN}` })
  assert.equal(check('admin', await send('POST', '/admin/v1/accounts', admin, '{"name":"x"}')).status, 415)
  for (const ok of ['utf-8', 'UTF8', '"utf-8"']) {
    const res = await send(
      'POST',
      '/api/v1/customers/search',
      { ...key, 'content-type': `application/json; charset=${ok}` },
      '{}',
    )
    assert.equal(res.status, 200, ok)
  }
})

test('string attribute values are capped at 65,536 characters', async () => {
  const upload = (n: number) =>
    a.api('/api/v1/customers', {
      customers: [{ external_id: 'big', name: 'Big', attributes: { country: 'x'.repeat(n) } }],
    })
  const over = await upload(65_537)
  assert.equal(over.status, 400)
  assert.equal(over.body.errors[0].path, '/customers/0/attributes/country')
  const at = await upload(65_536)
  assert.equal(at.status, 200)
  await waitForUpload(a.api, at.body.upload_id)
  const update = await a.api('/api/v1/customer/big', { attributes: { country: 'y'.repeat(65_537) } }, 'PUT')
  assert.equal(update.status, 400)
})

// Hostile strings in every string field of otherwise valid bodies, drawn with a fixed seed so the
// corpus is the same on every run.
const nasty = fc.oneof(
  fc.string(),
  fc.constantFrom('\ud800', 'x\udc00', '\u0000', '\uffff', '\u2028', "'; drop table customers; --", '%', '_', '\\'),
  fc.constantFrom('0000-01-01', '2024-02-30', '9999-12-31', '0001-01-01', '1e999', 'NaN', ''),
)
const corpus = fc.sample(
  fc.record({ id: nasty, name: nasty, country: nasty, date: nasty, plan: nasty, title: nasty }),
  { numRuns: 60, seed: 20261125 },
)

test('hostile strings in well-shaped bodies: no 5xx, and every 200 is processed without a failed job', async () => {
  const key = (path: string, body: unknown) => a.api(path, body)
  for (const [i, c] of corpus.entries()) {
    const answers = [
      await key('/api/v1/customers', {
        customers: [
          {
            external_id: `h${i}${c.id}`,
            name: c.name,
            attributes: { country: c.country, plan_started: c.plan },
            metrics: [{ date: c.date, logins: 1 }],
          },
        ],
      }),
      await key('/api/v1/customer', {
        external_id: `s${i}${c.id}`,
        name: c.name,
        metrics: [{ date: c.date, logins: 2 }],
      }),
      await key('/api/v1/contacts', {
        contacts: [{ customer_external_id: 'known', contact_external_id: `k${i}${c.id}`, contact_name: c.name }],
      }),
      await key('/api/v1/customers/search', {
        filters: [{ propertyName: 'plan_started', operator: 'GT', value: c.date }],
      }),
      await key('/api/v1/contacts/search', { filters: [{ propertyName: 'name', operator: 'LIKE', value: c.name }] }),
      await key('/api/tracker/track', {
        trackerKey: a.trackerKey,
        events: [
          {
            name: c.title || 'e',
            timestamp: Date.now(),
            identification: { customer: 'known' },
            data: { customer: { plan_started: c.plan, country: c.country } },
          },
        ],
      }),
      await s.admin('POST', `/accounts/${a.id}/tags`, { title: c.title }),
    ]
    for (const [j, res] of answers.entries()) {
      check(`corpus ${i}.${j}`, {
        status: res.status,
        type: res.headers.get('content-type') ?? '',
        body: res.body,
        text: JSON.stringify(res.body),
      })
    }
  }
  // Every acknowledged upload is processed, and no job failed.
  const uploads = await s.sql`select id from uploads where account_id = ${a.id} order by id`
  for (const { id } of uploads)
    assert.equal((await waitForUpload(a.api, id, 60_000)).status, 'processed', `upload ${id}`)
  for (let tries = 0; ; tries++) {
    const [{ pending }] = await s.sql`select count(*)::int as pending from tracking_events where account_id = ${a.id}
      and status = 'received'`
    if (pending === 0) break
    assert.ok(tries < 300, 'tracked events were never applied')
    await new Promise((r) => setTimeout(r, 100))
  }
  const failed = await s.sql`select task_identifier, last_error from graphile_worker.jobs where last_error is not null`
  assert.equal(failed.length, 0, JSON.stringify(failed))
})

test('the replayed corpus covered every endpoint group and every kind of refusal', () => {
  const statuses = new Set(answered.map((x) => x.answer.status))
  for (const status of [200, 400, 404, 406, 415]) assert.ok(statuses.has(status), `no ${status} in the corpus`)
})
