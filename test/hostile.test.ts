// A hostile-input corpus replayed against every endpoint group: hostile path and query values on
// every route of the routing table, bodies that are not UTF-8 or not declared as such, oversized
// values, dates PostgreSQL cannot hold, and hostile strings in well-shaped bodies. Asserted: no
// 5xx; every 4xx is Problem Details, and every 400 names a path; no message in the validation
// library's own phrasing; and no request answered 200 is followed by a failed or stuck job.
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { after, before, test } from 'node:test'
import { routes } from '../src/api/routes.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { scoredAccount, uploadAndWait, waitForUpload } from './helpers/fixtures.ts'
import { hostileRecords } from './helpers/hostile.ts'
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
const send = (
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
) =>
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
        resolve({
          status: res.statusCode ?? 0,
          type: String(res.headers['content-type']),
          body: parsed,
          text,
        })
      })
    })
    req.on('error', reject)
    req.end(body)
  })

const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` }
const authFor = (route: (typeof routes)[number]): Record<string, string> =>
  route.auth === 'admin' ? ADMIN : route.auth === 'none' ? {} : { 'service-key': walk.token }

// What the library would say on its own: "Invalid type: Expected string but received 5".
const LIBRARY_PHRASING =
  /Invalid (type|key|length|value|format|entry)|Expected .* but received|Received /

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
    assert.ok(
      Array.isArray(answer.body.errors) && answer.body.errors.length > 0,
      `${what}: no errors`,
    )
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
      ? HOSTILE_SEGMENTS.map((seg) =>
          route.path.replace(/:(\w+)/g, (_, n) => (n === 'id' ? String(walk.id) : seg)),
        )
      : [route.path]
    if (names.length > 1 || (names.length === 1 && names[0] !== 'id'))
      paths.push(route.path.replace(/:(\w+)/g, '%00'))
    for (const path of paths) {
      for (const query of ['', ...HOSTILE_QUERIES]) {
        const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : '{}'
        const headers = { ...authFor(route), ...(body && { 'content-type': 'application/json' }) }
        check(
          `${route.method} ${path.slice(0, 80)}${query}`,
          await send(route.method, path + query, headers, body),
        )
      }
    }
  }
})

test('a NUL or invalid UTF-8 in a path id is a 404, in a query value a 400 naming it', async () => {
  for (const id of ['%00', 'a%00b', '%C3%28', '%FF']) {
    const res = check(id, await send('GET', `/api/v1/customer/${id}`, { 'service-key': a.token }))
    assert.equal(res.status, 404, id)
  }
  const res = check(
    'events',
    await send('GET', `/admin/v1/accounts/${a.id}/events?customer=%00`, ADMIN),
  )
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
    [
      '/api/v1/customers',
      (x) => JSON.stringify({ customers: [{ external_id: `u${x}`, name: 'U' }] }),
      key,
    ],
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
  const [{ before }] =
    await s.sql`select (select count(*) from uploads) + (select count(*) from tracking_events)
    + (select count(*) from tags) as before`
  for (const [path, json, headers] of cases) {
    for (const hex of INVALID_UTF8) {
      const res = check(`${path} ${hex}`, await send('POST', path, headers, bodyWith(hex, json)))
      assert.equal(res.status, 400, `${path} ${hex}`)
      assert.match(res.body.detail, /UTF-8/)
    }
  }
  const [{ after: now }] =
    await s.sql`select (select count(*) from uploads) + (select count(*) from tracking_events)
    + (select count(*) from tags) as after`
  assert.equal(now, before)
})

test('a declared charset other than UTF-8 is a 415, or a 406 on uploads and single-record writes', async () => {
  const latin1 = (headers: Record<string, string>) => ({
    ...headers,
    'content-type': 'application/json; charset=latin1',
  })
  const key = { 'service-key': a.token }
  assert.equal(
    check('search', await send('POST', '/api/v1/customers/search', latin1(key), '{}')).status,
    415,
  )
  assert.equal(
    check('track', await send('POST', '/api/tracker/track', latin1(key), '{}')).status,
    415,
  )
  assert.equal(
    check('upload', await send('POST', '/api/v1/customers', latin1(key), '{}')).status,
    406,
  )
  assert.equal(
    check('create', await send('POST', '/api/v1/customer', latin1(key), '{}')).status,
    406,
  )
  const admin = latin1({ authorization: `Bearer ${ADMIN_TOKEN}` })
  assert.equal(
    check('admin', await send('POST', '/admin/v1/accounts', admin, '{"name":"x"}')).status,
    415,
  )
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

test('string attribute values are capped at 65,536 characters, an emoji counting as one', async () => {
  const upload = (text: string) =>
    a.api('/api/v1/customers', {
      customers: [{ external_id: 'big', name: 'Big', attributes: { country: text } }],
    })
  for (const c of ['x', '\u{1F600}']) {
    const over = await upload(c.repeat(65_537))
    assert.equal(over.status, 400)
    assert.deepEqual(over.body.errors, [
      { path: '/customers/0/attributes/country', message: 'At most 65536 characters.' },
    ])
    const at = await upload(c.repeat(65_536))
    assert.equal(at.status, 200, JSON.stringify(at.body))
    await waitForUpload(a.api, at.body.upload_id)
  }
  const [big] = await s.sql`select attributes->>'country' as country from customers
    where account_id = ${a.id} and external_id = 'big'`
  assert.equal(big.country, '\u{1F600}'.repeat(65_536))
  const update = await a.api(
    '/api/v1/customer/big',
    { attributes: { country: 'y'.repeat(65_537) } },
    'PUT',
  )
  assert.equal(update.status, 400)
})

const corpus = hostileRecords

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
        contacts: [
          {
            customer_external_id: 'known',
            contact_external_id: `k${i}${c.id}`,
            contact_name: c.name,
          },
        ],
      }),
      await key('/api/v1/customers/search', {
        filters: [{ propertyName: 'plan_started', operator: 'GT', value: c.date }],
      }),
      await key('/api/v1/contacts/search', {
        filters: [{ propertyName: 'name', operator: 'LIKE', value: c.name }],
      }),
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
    const [{ pending }] =
      await s.sql`select count(*)::int as pending from tracking_events where account_id = ${a.id}
      and status = 'received'`
    if (pending === 0) break
    assert.ok(tries < 300, 'tracked events were never applied')
    await new Promise((r) => setTimeout(r, 100))
  }
  const failed = await s.sql`select task_identifier, last_error from graphile_worker.jobs
      where last_error is not null`
  assert.equal(failed.length, 0, JSON.stringify(failed))
})

test('a scoring rule whose values map has a key with NUL or an unpaired surrogate is a 400 naming it', async () => {
  const o = await scoredAccount(s, 'Odd model')
  for (const key of ['a\0b', 'x\uD800', '\uDC00y']) {
    const res = await s.admin('PUT', `/accounts/${o.id}/scoring`, {
      customer: {
        engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }],
        fit: [{ codename: 'country', weight: 50, values: { US: 100, [key]: 50 } }],
      },
    })
    check(`model key ${JSON.stringify(key)}`, {
      status: res.status,
      type: res.headers.get('content-type') ?? '',
      body: res.body,
      text: JSON.stringify(res.body),
    })
    assert.equal(res.status, 400, JSON.stringify(res.body))
    assert.deepEqual(
      res.body.errors.map((e: any) => e.path),
      [`/customer/fit/0/values/${key}`],
    )
  }
  const model = await s.admin('GET', `/accounts/${o.id}/scoring`)
  assert.deepEqual(
    model.body.customer.fit[0].values,
    { US: 100, DE: 50 },
    'the model stays as it was',
  )
})

// ---- the one value rule: numbers no double holds and a byte order mark, on every path -----------

const BOM = Buffer.from([0xef, 0xbb, 0xbf])
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// An account whose model reads a number attribute and a number metric of each level.
const valuesAccount = async () => {
  const v = await s.account('Values')
  const define = (entity: string, kind: string, codename: string) =>
    s.admin('POST', `/accounts/${v.id}/properties`, { entity, kind, codename, type: 'number' })
  await define('customer', 'attribute', 'employees')
  await define('customer', 'metric', 'logins')
  await define('contact', 'attribute', 'rating')
  await define('contact', 'metric', 'sessions')
  await s.admin('PUT', `/accounts/${v.id}/tracking`, { domains: ['values.test'] })
  const model = await s.admin('PUT', `/accounts/${v.id}/scoring`, {
    customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] },
    contact: { engagement: [{ codename: 'sessions', weight: 100, bad: 0, good: 20 }] },
  })
  assert.equal(model.status, 200, JSON.stringify(model.body))
  return v
}

// Every event of the account is applied and every job has run, none failed (a failed attempt
// leaves last_error) and none stays.
const settled = async (accountId: number) => {
  for (let tries = 0; ; tries++) {
    const [jobs] =
      await s.sql`select count(*)::int as pending, string_agg(last_error, '; ') as errors,
        (select count(*)::int from tracking_events where account_id = ${accountId}
          and status = 'received') as events
      from graphile_worker._private_jobs where payload->>'account_id' = ${String(accountId)}`
    assert.equal(jobs.errors, null, 'a job failed')
    if (jobs.pending === 0 && jobs.events === 0) return
    assert.ok(tries < 600, `${jobs.pending} jobs stuck`)
    await sleep(100)
  }
}

let values: Awaited<ReturnType<typeof valuesAccount>>
const raw = (path: string, text: string | Buffer, method = 'POST') =>
  send(method, path, { 'service-key': values.token, 'content-type': 'application/json' }, text)
const tracked = (data: string) =>
  `{"trackerKey":"${values.trackerKey}","events":[{"name":"e","timestamp":${Date.now()},` +
  `"identification":{"customer":"c1","contact":"p1"},"data":${data}}]}`

test('values: a number no double holds is a 400 naming its path on tracking, uploads and writes', async () => {
  values = await valuesAccount()
  await uploadAndWait(values.api, 'customers', [
    { external_id: 'c1', name: 'C1', metrics: [{ date: '2026-01-01', logins: 10 }] },
  ])
  await uploadAndWait(values.api, 'contacts', [
    {
      customer_external_id: 'c1',
      contact_external_id: 'p1',
      contact_name: 'P1',
      metrics: [{ date: '2026-01-01', sessions: 5 }],
    },
  ])
  const cases: [string, string | Buffer, string][] = [
    [
      '/api/tracker/track',
      tracked('{"customer":{"employees":1e400}}'),
      '/events/0/data/customer/employees',
    ],
    [
      '/api/tracker/track',
      tracked('{"customer":{"employees":-1e400}}'),
      '/events/0/data/customer/employees',
    ],
    [
      '/api/tracker/track',
      tracked('{"customer":{"unknown":1e1000000}}'),
      '/events/0/data/customer/unknown',
    ],
    [
      '/api/tracker/track',
      tracked('{"contact":{"rating":-1e400}}'),
      '/events/0/data/contact/rating',
    ],
    [
      '/api/tracker/track',
      tracked('{"contact":{"x":[1,1e1000000]}}'),
      '/events/0/data/contact/x/1',
    ],
    [
      '/api/tracker/track',
      tracked('{"anywhere":{"deep":{"n":1e1000000}}}'),
      '/events/0/data/anywhere/deep/n',
    ],
    [
      '/api/tracker/track',
      Buffer.concat([BOM, Buffer.from(tracked('{"customer":{"employees":1e1000000}}'))]),
      '/events/0/data/customer/employees',
    ],
    [
      '/api/v1/customers',
      '{"customers":[{"external_id":"c2","name":"C2","attributes":{"employees":1e400}}]}',
      '/customers/0/attributes/employees',
    ],
    [
      '/api/v1/customers',
      '{"customers":[{"external_id":"c2","name":"C2","metrics":[{"date":"2026-01-01","dropped":-1e400}]}]}',
      '/customers/0/metrics/0/dropped',
    ],
    [
      '/api/v1/customer',
      '{"external_id":"c3","name":"C3","attributes":{"employees":1e400}}',
      '/attributes/employees',
    ],
  ]
  const [{ before }] =
    await s.sql`select (select count(*) from tracking_events where account_id = ${values.id})
    + (select count(*) from uploads where account_id = ${values.id}) as before`
  for (const [path, body, at] of cases) {
    const res = check(`${path} ${body.toString().slice(-60)}`, await raw(path, body))
    assert.equal(res.status, 400, res.text)
    assert.deepEqual(
      res.body.errors.map((e: { path: string }) => e.path),
      [at],
      res.text,
    )
  }
  const put = check(
    'PUT',
    await raw('/api/v1/customer/c1', '{"attributes":{"employees":-1e400}}', 'PUT'),
  )
  assert.deepEqual(
    put.body.errors.map((e: { path: string }) => e.path),
    ['/attributes/employees'],
  )
  const [{ after: now }] =
    await s.sql`select (select count(*) from tracking_events where account_id = ${values.id})
    + (select count(*) from uploads where account_id = ${values.id}) as after`
  assert.equal(now, before, 'nothing is stored from a refused request')
})

test('values: a byte order mark is ignored alike on tracking, uploads and search', async () => {
  const bom = (text: string) => Buffer.concat([BOM, Buffer.from(text)])
  // 1e-400 is 0 to JSON.parse: stored as 0, so that every read agrees with what was checked.
  const track = check(
    'track',
    await raw('/api/tracker/track', bom(tracked('{"customer":{"employees":1e-400}}'))),
  )
  assert.equal(track.status, 200, track.text)
  const upload = check(
    'upload',
    await raw(
      '/api/v1/customers',
      bom('{"customers":[{"external_id":"c4","name":"C4","attributes":{"employees":7}}]}'),
    ),
  )
  assert.equal(upload.status, 200, upload.text)
  await waitForUpload(values.api, upload.body.upload_id)
  await settled(values.id)
  const search = check(
    'search',
    await raw(
      '/api/v1/customers/search',
      bom('{"filters":[{"propertyName":"employees","operator":"KNOWN"}]}'),
    ),
  )
  assert.equal(search.status, 200, search.text)
  const found = Object.fromEntries(
    search.body.results.map((r: { id: string; properties: Record<string, unknown> }) => [
      r.id,
      r.properties.employees,
    ]),
  )
  assert.deepEqual(found, { c1: 0, c4: 7 })
  const c1 = check(
    'GET c1',
    await send('GET', '/api/v1/customer/c1', { 'service-key': values.token }),
  )
  assert.equal(c1.body.properties.employees, 0)
  const [stored] = await s.sql`select attributes->'employees' as e from customers
    where account_id = ${values.id} and external_id = 'c1'`
  assert.equal(JSON.stringify(stored.e), '0')
})

test('values: a stored number no double holds (old data) never fails scoring, aggregates, search or GET', async () => {
  // As the tracker stored them before the one value rule.
  await s.sql`update customers set attributes = attributes || '{"employees": 1e400}'::jsonb,
    metrics = metrics || '{"logins": -1e400}'::jsonb where account_id = ${values.id}
      and external_id = 'c1'`
  await s.sql`update customer_snapshots set "values" = "values" || '{"logins": 1e400}'::jsonb
    where account_id = ${values.id}`
  await s.sql`update contacts set attributes = attributes || '{"rating": -1e400}'::jsonb
    where account_id = ${values.id}`
  await s.sql`update contact_snapshots set "values" = "values" || '{"sessions": 1e-400}'::jsonb
    where account_id = ${values.id}`
  // A model change rescores every record of the account, reading each of those values.
  const model = await s.admin('PUT', `/accounts/${values.id}/scoring`, {
    customer: {
      engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }],
      fit: [
        { codename: 'employees', weight: 50, bad: 0, good: 100 },
        { codename: 'logins', weight: 50, bad: 0, good: 40 },
      ],
    },
    contact: {
      engagement: [
        { codename: 'sessions', weight: 50, bad: 0, good: 20 },
        { codename: 'rating', weight: 50, bad: 0, good: 5 },
      ],
    },
  })
  assert.equal(model.status, 200, JSON.stringify(model.body))
  await settled(values.id)
  const [c4] = await s.sql`select h.fitscore from customer_scores h
      join customers c on c.service_id = h.customer_id
    where c.account_id = ${values.id} and c.external_id = 'c4'`
  assert.equal(c4.fitscore, -86, 'the other records of the batch are scored: 7 employees of 0..100')

  // Once per run, whatever the number of batches and values.
  const lines: unknown[] = []
  await scoreRecords(
    s.sql,
    { account_id: values.id, entity: 'customer' },
    { log: (...line) => lines.push(line) },
  )
  assert.equal(lines.length, 1, JSON.stringify(lines))

  const key = { 'service-key': values.token, 'content-type': 'application/json' }
  const aggregate = check(
    'aggregate',
    await send(
      'POST',
      '/api/v1/customers/aggregate',
      key,
      '{"fields":["employees","logins"],"buckets":4}',
    ),
  )
  assert.equal(aggregate.status, 200, aggregate.text)
  const [employees, logins] = aggregate.body.fields
  assert.deepEqual([employees.count, employees.max, logins.count], [1, 7, 0], aggregate.text)
  for (const path of ['/api/v1/customers/search', '/api/v1/contacts/search'])
    assert.equal(check(path, await send('POST', path, key, '{}')).status, 200)
  for (const path of ['/api/v1/customer/c1', '/api/v1/customer/c1/contact/p1'])
    assert.equal(check(path, await send('GET', path, key)).status, 200)
  await settled(values.id)
})

test('the replayed corpus covered every endpoint group and every kind of refusal', () => {
  const statuses = new Set(answered.map((x) => x.answer.status))
  for (const status of [200, 400, 404, 406, 415])
    assert.ok(statuses.has(status), `no ${status} in the corpus`)
})
