import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait, waitForUpload } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'
import { LARGE_BODY_BYTES } from '../src/http/permits.ts'
import { connect } from '../src/db/client.ts'
import { clusterFromEnv } from './helpers/citus.ts'

let s: TestService
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
})
after(() => s.stop())

type Api = Awaited<ReturnType<typeof scoredAccount>>['api']
const paths = (res: { body: any }) => (res.body.errors ?? []).map((e: { path: string }) => e.path)
const customer = (i: number, extra: object = {}) => ({
  external_id: `c${i}`,
  name: `Customer ${i}`,
  ...extra,
})

const upload = (api: Api, customers: object[]) =>
  uploadAndWait(api, 'customers', customers, { status: null })
const uploadContacts = (api: Api, contacts: object[]) =>
  uploadAndWait(api, 'contacts', contacts, { status: null })

// Each case: a body that must be refused with 400 naming exactly these paths.
const customerCases: [string, unknown, string[]][] = [
  ['customers missing', {}, ['/customers']],
  ['customers not an array', { customers: {} }, ['/customers']],
  ['customers empty', { customers: [] }, ['/customers']],
  [
    'more than 1000 customers',
    { customers: Array.from({ length: 1001 }, (_, i) => customer(i)) },
    ['/customers'],
  ],
  ['external_id missing', { customers: [{ name: 'x' }] }, ['/customers/0/external_id']],
  [
    'external_id empty',
    { customers: [{ external_id: '', name: 'x' }] },
    ['/customers/0/external_id'],
  ],
  [
    'external_id over 255',
    { customers: [customer(0, { external_id: 'x'.repeat(256) })] },
    ['/customers/0/external_id'],
  ],
  ['name missing', { customers: [{ external_id: 'a' }] }, ['/customers/0/name']],
  ['name over 255', { customers: [customer(0, { name: 'n'.repeat(256) })] }, ['/customers/0/name']],
  [
    'owner_email over 255',
    { customers: [customer(0, { owner_email: `${'o'.repeat(250)}@x.test` })] },
    ['/customers/0/owner_email'],
  ],
  [
    'attributes not an object',
    { customers: [customer(0, { attributes: [1] })] },
    ['/customers/0/attributes'],
  ],
  [
    'attribute value of another type',
    { customers: [customer(0, { attributes: { country: 5 } })] },
    ['/customers/0/attributes/country'],
  ],
  [
    'boolean attribute given a string',
    { customers: [customer(0, { attributes: { has_sso: 'yes' } })] },
    ['/customers/0/attributes/has_sso'],
  ],
  [
    'date attribute not a date',
    { customers: [customer(0, { attributes: { plan_started: '2026-13-01' } })] },
    ['/customers/0/attributes/plan_started'],
  ],
  [
    'attribute value an object',
    { customers: [customer(0, { attributes: { country: { a: 1 } } })] },
    ['/customers/0/attributes/country'],
  ],
  [
    'metrics not an array',
    { customers: [customer(0, { metrics: { date: '2026-01-01' } })] },
    ['/customers/0/metrics'],
  ],
  [
    'more than 200 metric objects',
    {
      customers: [
        customer(0, {
          metrics: Array.from({ length: 201 }, (_, i) => ({
            date: new Date(Date.UTC(2020, 0, 1 + i)).toISOString().slice(0, 10),
          })),
        }),
      ],
    },
    ['/customers/0/metrics'],
  ],
  [
    'metric date missing',
    { customers: [customer(0, { metrics: [{ logins: 1 }] })] },
    ['/customers/0/metrics/0/date'],
  ],
  [
    'metric date malformed',
    { customers: [customer(0, { metrics: [{ date: '01/02/2026' }] })] },
    ['/customers/0/metrics/0/date'],
  ],
  [
    'metric date not on the calendar',
    { customers: [customer(0, { metrics: [{ date: '2026-02-30' }] })] },
    ['/customers/0/metrics/0/date'],
  ],
  [
    'metric dates not unique',
    {
      customers: [
        customer(0, {
          metrics: [{ date: '2026-01-01' }, { date: '2026-01-02' }, { date: '2026-01-01' }],
        }),
      ],
    },
    ['/customers/0/metrics/2/date'],
  ],
  [
    'metric value of another type',
    { customers: [customer(0, { metrics: [{ date: '2026-01-01', logins: '12' }] })] },
    ['/customers/0/metrics/0/logins'],
  ],
  [
    'errors in several items are all reported',
    { customers: [customer(0), { name: 'x' }, customer(2, { name: 7 })] },
    ['/customers/1/external_id', '/customers/2/name'],
  ],
]

for (const [name, body, expected] of customerCases) {
  test(`customer upload refuses: ${name}`, async () => {
    const a = await scoredAccount(s)
    const res = await a.api('/api/v1/customers', body)
    assert.equal(res.status, 400)
    assert.equal(res.headers.get('content-type'), 'application/problem+json')
    assert.deepEqual(paths(res).sort(), expected.sort())
    const [{ n }] = await s.sql`select count(*)::int as n from uploads where account_id = ${a.id}`
    assert.equal(n, 0, 'nothing is stored from a refused request')
  })
}

test('limits hold at their edge: 1000 customers, 255 characters, 200 metric objects are accepted', async () => {
  const a = await scoredAccount(s)
  const res = await a.api('/api/v1/customers', {
    customers: [
      ...Array.from({ length: 999 }, (_, i) => customer(i)),
      {
        external_id: 'x'.repeat(255),
        name: 'n'.repeat(255),
        owner_email: `${'o'.repeat(245)}@acme.test`,
        metrics: Array.from({ length: 200 }, (_, i) => ({
          date: new Date(Date.UTC(2020, 0, 1 + i)).toISOString().slice(0, 10),
          logins: i,
        })),
      },
    ],
  })
  assert.equal(res.status, 200)
  assert.deepEqual(Object.keys(res.body).sort(), ['items', 'status', 'upload_id'])
  assert.equal(res.body.items, 1000)
  assert.equal(res.body.status, 'received')
  const done = await waitForUpload(a.api, res.body.upload_id)
  assert.equal(done.created, 1000)
  const [{ n }] =
    await s.sql`select count(*)::int as n from customer_snapshots where account_id = ${a.id}`
  assert.equal(n, 200)
})

const contactCases: [string, unknown, string[]][] = [
  ['contacts missing', {}, ['/contacts']],
  [
    'more than 100 contacts',
    {
      contacts: Array.from({ length: 101 }, (_, i) => ({
        customer_external_id: 'c',
        contact_external_id: `p${i}`,
        contact_name: 'x',
      })),
    },
    ['/contacts'],
  ],
  [
    'customer_external_id missing',
    { contacts: [{ contact_external_id: 'p', contact_name: 'x' }] },
    ['/contacts/0/customer_external_id'],
  ],
  [
    'contact_external_id over 255',
    {
      contacts: [
        { customer_external_id: 'c', contact_external_id: 'p'.repeat(256), contact_name: 'x' },
      ],
    },
    ['/contacts/0/contact_external_id'],
  ],
  [
    'contact_name over 255',
    {
      contacts: [
        { customer_external_id: 'c', contact_external_id: 'p', contact_name: 'x'.repeat(256) },
      ],
    },
    ['/contacts/0/contact_name'],
  ],
  [
    'contact metric of another type',
    {
      contacts: [
        {
          customer_external_id: 'c',
          contact_external_id: 'p',
          contact_name: 'x',
          metrics: [{ date: '2026-01-01', sessions: true }],
        },
      ],
    },
    ['/contacts/0/metrics/0/sessions'],
  ],
]

for (const [name, body, expected] of contactCases) {
  test(`contact upload refuses: ${name}`, async () => {
    const a = await scoredAccount(s)
    const res = await a.api('/api/v1/contacts', body)
    assert.equal(res.status, 400)
    assert.deepEqual(paths(res).sort(), expected.sort())
  })
}

test('a contact upload over 5 MB answers 413', async () => {
  const a = await scoredAccount(s)
  const res = await a.api('/api/v1/contacts', {
    contacts: [
      {
        customer_external_id: 'c',
        contact_external_id: 'p',
        contact_name: 'x'.repeat(5 * 1024 * 1024),
      },
    ],
  })
  assert.equal(res.status, 413)
})

test('406: a body that is not JSON, an Accept without JSON, an account whose records are owned elsewhere', async () => {
  const a = await scoredAccount(s)
  const body = JSON.stringify({ customers: [customer(1)] })
  for (const path of ['/api/v1/customers', '/api/v1/contacts']) {
    assert.equal(
      (await s.call('POST', path, body, { 'service-key': a.token, 'content-type': 'text/plain' }))
        .status,
      406,
    )
    assert.equal(
      (
        await s.call('POST', path, body, {
          'service-key': a.token,
          'content-type': 'application/json',
          accept: 'text/html',
        })
      ).status,
      406,
    )
  }
  assert.equal(
    (
      await s.call('POST', '/api/v1/customers', body, {
        'service-key': a.token,
        'content-type': 'application/json; charset=utf-8',
        accept: 'application/json, text/plain',
      })
    ).status,
    200,
  )
  const file = await s.account('Filed', { source_of_truth: 'FILE' })
  await s.admin('PUT', `/accounts/${file.id}/scoring`, {
    customer: { fit: [{ codename: 'crm_link', weight: 1, values: { a: 100 } }] },
  })
  const res = await file.api('/api/v1/customers', { customers: [customer(1)] })
  assert.equal(res.status, 406)
  assert.match(res.body.detail, /FILE/)
})

test('490: customer uploads need a customer scoring model; contact uploads do not', async () => {
  const a = await s.account()
  const res = await a.api('/api/v1/customers', { customers: [customer(1)] })
  assert.equal(res.status, 490)
  assert.equal(res.body.status, 490)
  assert.equal((await a.api('/api/v1/customer', customer(1))).status, 490)
  assert.equal(
    (
      await a.api('/api/v1/contacts', {
        contacts: [{ customer_external_id: 'c', contact_external_id: 'p', contact_name: 'x' }],
      })
    ).status,
    200,
  )
})

test('429: too many unprocessed uploads (backpressure), and the per-key rate limit', async () => {
  const quiet = await startTestService(
    { maxPendingUploads: 2, apiRateLimit: 4 },
    { http: true, worker: false },
  )
  try {
    const a = await scoredAccount(quiet)
    assert.equal((await a.api('/api/v1/customers', { customers: [customer(1)] })).status, 200)
    assert.equal((await a.api('/api/v1/customers', { customers: [customer(2)] })).status, 200)
    const res = await a.api('/api/v1/contacts', {
      contacts: [{ customer_external_id: 'c1', contact_external_id: 'p', contact_name: 'x' }],
    })
    assert.equal(res.status, 429)
    assert.equal(res.headers.get('retry-after'), '5')
    let limited
    for (let i = 0; i < 10 && limited?.status !== 429; i++)
      limited = await a.api('/api/v1/uploads/1', undefined, 'GET')
    assert.equal(limited!.status, 429)
    assert.ok(Number(limited!.headers.get('retry-after')) >= 1)
  } finally {
    await quiet.stop()
  }
})

const permitsTitle =
  'large bodies sent together, some refused, all answer as alone: the refused free their turn'
test(permitsTitle, async () => {
  const a = await scoredAccount(s)
  const big = (from: number, extra: object = {}) =>
    Array.from({ length: 1000 }, (_, i) =>
      customer(from + i, { metrics: [{ date: '2026-01-01', logins: i }] }),
    ).map((c, i) => (i === 999 ? { ...c, ...extra } : c))
  const bodies = [
    { customers: big(0) },
    { customers: big(1000, { attributes: { country: 5 } }) },
    { customers: big(2000, { surname: 'x' }) },
    { customers: big(3000) },
  ]
  assert.ok(bodies.every((b) => JSON.stringify(b).length >= LARGE_BODY_BYTES))
  const answers = await Promise.all(bodies.map((b) => a.api('/api/v1/customers', b)))
  assert.deepEqual(
    answers.map((r) => r.status),
    [200, 400, 400, 200],
  )
  assert.deepEqual(paths(answers[1]), ['/customers/999/attributes/country'])
  assert.deepEqual(paths(answers[2]), ['/customers/999/surname'])
  for (const r of [answers[0], answers[3]])
    assert.equal((await waitForUpload(a.api, r.body.upload_id)).created, 1000)
  const [{ n }] = await s.sql`select count(*)::int as n from customers where account_id = ${a.id}`
  assert.equal(n, 2000)
})

const mergeTitle =
  'merge: attributes kept across uploads and cleared by null, snapshots merged by date, ' +
  'unknown keys dropped and counted'
test(mergeTitle, async () => {
  const a = await scoredAccount(s)
  const first = await upload(a.api, [
    customer(1, {
      attributes: { country: 'US', has_sso: true, nope: 1 },
      metrics: [{ date: '2026-01-01', logins: 5, seats: 2, junk: 3 }],
    }),
  ])
  assert.equal(first.dropped_keys, 2)
  assert.equal(first.created, 1)
  const second = await upload(a.api, [
    customer(1, {
      name: 'Renamed',
      attributes: { country: null, plan_started: '2025-05-01' },
      metrics: [
        { date: '2026-01-01', logins: 7 },
        { date: '2026-02-01', seats: 3 },
      ],
    }),
  ])
  assert.equal(second.updated, 1)
  assert.equal(second.created, 0)
  const [c] =
    await s.sql`select name, attributes, metrics from customers where account_id = ${a.id}`
  assert.equal(c.name, 'Renamed')
  assert.deepEqual(c.attributes, { has_sso: true, plan_started: '2025-05-01' })
  // metrics: each metric's value in the latest snapshot holding it.
  assert.deepEqual(c.metrics, { logins: 7, seats: 3 })
  const snaps =
    await s.sql`select to_char(date, 'YYYY-MM-DD') as date, "values" from customer_snapshots
      where account_id = ${a.id}
      order by date`
  assert.deepEqual(
    snaps.map((r) => [r.date, r.values]),
    [
      ['2026-01-01', { logins: 7, seats: 2 }],
      ['2026-02-01', { seats: 3 }],
    ],
  )
  await upload(a.api, [customer(1, { metrics: [{ date: '2026-02-01', seats: null }] })])
  const [again] = await s.sql`select "values" from customer_snapshots where account_id = ${a.id}
      and date = '2026-02-01'`
  assert.deepEqual(again.values, {})
})

test('dropped keys are named in the upload status, most often first, with a did-you-mean where one fits', async () => {
  const a = await scoredAccount(s, 'Typos')
  const items = [1, 2, 3].map((i) =>
    customer(i, {
      attributes: { country: 'US', contry: 'US', ...(i === 1 && { wholly_unknown: 1 }) },
      metrics: [{ date: '2026-01-01', logns: i }],
    }),
  )
  const status = await upload(a.api, items)
  assert.equal(status.dropped_keys, 7)
  assert.deepEqual(status.dropped_key_names, [
    { key: 'contry', count: 3, did_you_mean: 'country' },
    { key: 'logns', count: 3, did_you_mean: 'logins' },
    { key: 'wholly_unknown', count: 1, did_you_mean: null },
  ])
  const listed = await s.admin('GET', `/accounts/${a.id}/uploads`)
  assert.deepEqual(listed.body[0].dropped_key_names, status.dropped_key_names)
})

// Keys no property defines are dropped, and their names kept to be shown: NUL and unpaired
// surrogates become U+FFFD, and a long name is cut at 200 code points, never inside a pair.
test('odd bytes in dropped key names: no 5xx on the six record routes, and the names read back storable', async () => {
  const a = await scoredAccount(s, 'Odd keys')
  const long = `${'k'.repeat(199)}\u{1F600}tail`
  const odd = { 'nul\0key': 1, 'high\uD800': 1, 'low\uDC00': 1, [long]: 1 }
  const stored = [
    { key: 'high\uFFFD', count: 2, did_you_mean: null },
    { key: `${'k'.repeat(199)}\u{1F600}... (204 characters)`, count: 2, did_you_mean: null },
    { key: 'low\uFFFD', count: 2, did_you_mean: null },
    { key: 'nul\uFFFDkey', count: 2, did_you_mean: null },
  ]
  const values = { attributes: odd, metrics: [{ date: '2026-01-01', ...odd }] }
  await a.api('/api/v1/customer', { external_id: 'parent', name: 'Parent' })
  let n = 0
  const sends: [kind: string, send: () => ReturnType<Api>][] = [
    [
      'customers',
      () =>
        a.api('/api/v1/customers', {
          customers: [{ external_id: `u${++n}`, name: 'U', ...values }],
        }),
    ],
    [
      'contacts',
      () =>
        a.api('/api/v1/contacts', {
          contacts: [
            {
              customer_external_id: 'parent',
              contact_external_id: `u${++n}`,
              contact_name: 'U',
              ...values,
            },
          ],
        }),
    ],
    ...['/api/v1', '/v1'].flatMap(
      (prefix) =>
        [
          [
            'customers',
            () => a.api(`${prefix}/customer`, { external_id: `s${++n}`, name: 'S', ...values }),
          ],
          [
            'contacts',
            () =>
              a.api(`${prefix}/customer/parent/contact`, {
                contact_external_id: `s${++n}`,
                contact_name: 'S',
                ...values,
              }),
          ],
        ] as [string, () => ReturnType<Api>][],
    ),
  ]
  for (const [i, [kind, send]] of sends.entries()) {
    const res = await send()
    assert.ok(
      res.status === 200 || res.status === 201,
      `route ${i}: ${res.status} ${JSON.stringify(res.body)}`,
    )
    const [latest] = (await s.admin('GET', `/accounts/${a.id}/uploads`)).body
    assert.equal(latest.kind, kind)
    assert.equal(latest.dropped_keys, 8, `route ${i}`)
    assert.deepEqual(latest.dropped_key_names, stored, `route ${i}`)
    assert.equal((await waitForUpload(a.api, latest.upload_id)).status, 'processed', `route ${i}`)
  }
})

test('within one request a later duplicate wins, in item order', async () => {
  const a = await scoredAccount(s)
  const done = await upload(a.api, [
    customer(1, {
      name: 'First',
      attributes: { country: 'US', has_sso: false },
      metrics: [{ date: '2026-01-01', logins: 1 }],
    }),
    customer(2),
    customer(1, {
      name: 'Second',
      attributes: { has_sso: true },
      metrics: [{ date: '2026-01-01', logins: 2 }],
    }),
  ])
  assert.equal(done.created, 2)
  const rows = await s.sql`select external_id, name, attributes, metrics, service_id from customers
      where account_id = ${a.id}
      order by service_id`
  assert.deepEqual(
    rows.map((r) => r.external_id),
    ['c1', 'c2'],
    'service ids follow first appearance',
  )
  assert.equal(rows[0].name, 'Second')
  assert.deepEqual(rows[0].attributes, { country: 'US', has_sso: true })
  assert.deepEqual(rows[0].metrics, { logins: 2 })
})

// metrics = each metric's value in the latest snapshot that holds it, read from the stored rows.
const folded = (snapshots: { values: Record<string, unknown> }[]) =>
  Object.assign({}, ...snapshots.map((r) => r.values))
const storedState = async (accountId: number, entity: 'customer' | 'contact') => {
  const records = await s.sql`
    select r.external_id, r.name, r.attributes, r.metrics, coalesce(jsonb_agg(
      jsonb_build_object('date', to_char(t.date, 'YYYY-MM-DD'), 'values', t."values")
        order by t.date)
      filter (where t.date is not null), '[]') as snapshots
    from ${s.sql(`${entity}s`)} r left join ${s.sql(`${entity}_snapshots`)} t
      on t.account_id = r.account_id and t.${s.sql(`${entity}_id`)} = r.service_id
    where r.account_id = ${accountId} group by r.account_id, r.service_id order by r.service_id`
  return records.map((r) => ({ ...r }))
}

const newRecordsTitle =
  'new records are stored with their metrics: duplicates, nulls and dates folded as for stored records'
test(newRecordsTitle, async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [
    customer(1, { attributes: { country: 'US' }, metrics: [{ date: '2026-01-01', logins: 4 }] }),
  ])
  const done = await upload(a.api, [
    customer(2, {
      attributes: { country: 'DE', has_sso: true },
      metrics: [
        { date: '2026-01-01', logins: 1, seats: 2 },
        { date: '2026-03-01', logins: 3, seats: null },
      ],
    }),
    customer(1, {
      name: 'Old one',
      attributes: { country: null },
      metrics: [{ date: '2026-02-01', seats: 9 }],
    }),
    customer(3),
    customer(4, { metrics: [{ date: '2026-01-01', logins: null }] }),
    customer(2, {
      name: 'New one',
      attributes: { has_sso: null },
      metrics: [
        { date: '2026-01-01', seats: null },
        { date: '2026-02-01', logins: 2, seats: 5 },
      ],
    }),
  ])
  assert.deepEqual([done.created, done.updated], [3, 1])
  const stored = await storedState(a.id, 'customer')
  assert.deepEqual(stored, [
    {
      external_id: 'c1',
      name: 'Old one',
      attributes: {},
      metrics: { logins: 4, seats: 9 },
      snapshots: [
        { date: '2026-01-01', values: { logins: 4 } },
        { date: '2026-02-01', values: { seats: 9 } },
      ],
    },
    {
      external_id: 'c2',
      name: 'New one',
      attributes: { country: 'DE' },
      // A later date's null is not stored, so it clears nothing; the same date's later null does.
      metrics: { logins: 3, seats: 5 },
      snapshots: [
        { date: '2026-01-01', values: { logins: 1 } },
        { date: '2026-02-01', values: { logins: 2, seats: 5 } },
        { date: '2026-03-01', values: { logins: 3 } },
      ],
    },
    { external_id: 'c3', name: 'Customer 3', attributes: {}, metrics: {}, snapshots: [] },
    {
      external_id: 'c4',
      name: 'Customer 4',
      attributes: {},
      metrics: {},
      snapshots: [{ date: '2026-01-01', values: {} }],
    },
  ])
  for (const r of stored) assert.deepEqual(r.metrics, folded(r.snapshots), r.external_id)
  // Contacts take the same way: a new one with duplicates, an ignored one, an updated one.
  await uploadContacts(a.api, [
    {
      customer_external_id: 'c1',
      contact_external_id: 'p1',
      contact_name: 'P',
      metrics: [{ date: '2026-01-01', sessions: 1 }],
    },
  ])
  const contacts = await uploadContacts(a.api, [
    {
      customer_external_id: 'c2',
      contact_external_id: 'p2',
      contact_name: 'Q',
      metrics: [{ date: '2026-02-01', sessions: 2 }],
    },
    {
      customer_external_id: 'ghost',
      contact_external_id: 'p3',
      contact_name: 'R',
      metrics: [{ date: '2026-01-01', sessions: 7 }],
    },
    {
      customer_external_id: 'c1',
      contact_external_id: 'p1',
      contact_name: 'P',
      metrics: [{ date: '2026-03-01', sessions: 3 }],
    },
    {
      customer_external_id: 'c2',
      contact_external_id: 'p2',
      contact_name: 'Q2',
      attributes: { role: 'cfo' },
      metrics: [
        { date: '2026-01-01', sessions: 1 },
        { date: '2026-02-01', sessions: null },
      ],
    },
  ])
  assert.deepEqual([contacts.created, contacts.updated, contacts.ignored], [1, 1, 1])
  const storedContacts = await storedState(a.id, 'contact')
  assert.deepEqual(storedContacts, [
    {
      external_id: 'p1',
      name: 'P',
      attributes: {},
      metrics: { sessions: 3 },
      snapshots: [
        { date: '2026-01-01', values: { sessions: 1 } },
        { date: '2026-03-01', values: { sessions: 3 } },
      ],
    },
    {
      external_id: 'p2',
      name: 'Q2',
      attributes: { role: 'cfo' },
      metrics: { sessions: 1 },
      snapshots: [
        { date: '2026-01-01', values: { sessions: 1 } },
        { date: '2026-02-01', values: {} },
      ],
    },
  ])
  for (const r of storedContacts) assert.deepEqual(r.metrics, folded(r.snapshots), r.external_id)
})

const ownersTitle =
  'owners are linked by email case-insensitively; an unknown email warns and leaves the owner unchanged'
test(ownersTitle, async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [customer(1, { owner_email: 'OWNER@Acme.Test' })])
  const warned = await upload(a.api, [
    customer(1, { owner_email: 'ghost@acme.test' }),
    customer(2, { owner_email: 'ghost@acme.test' }),
  ])
  assert.deepEqual(
    warned.warnings.map((w: any) => w.external_id),
    ['c1', 'c2'],
  )
  assert.match(warned.warnings[0].message, /ghost@acme\.test/)
  const rows = await s.sql`
    select c.external_id, u.email from customers c left join users u on u.account_id = c.account_id
      and u.id = c.owner_user_id
    where c.account_id = ${a.id} order by c.external_id`
  assert.deepEqual(
    rows.map((r) => [r.external_id, r.email]),
    [
      ['c1', 'owner@acme.test'],
      ['c2', null],
    ],
  )
})

const contactsTitle =
  'contacts: need a stored customer (else ignored and counted), move between customers, unique per account'
test(contactsTitle, async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [customer(1), customer(2)])
  const first = await uploadContacts(a.api, [
    {
      customer_external_id: 'c1',
      contact_external_id: 'p1',
      contact_name: 'Pat',
      attributes: { role: 'cto' },
      metrics: [{ date: '2026-01-01', sessions: 3 }],
    },
    { customer_external_id: 'nope', contact_external_id: 'p2', contact_name: 'Ghost' },
  ])
  assert.equal(first.created, 1)
  assert.equal(first.ignored, 1)
  const moved = await uploadContacts(a.api, [
    { customer_external_id: 'c2', contact_external_id: 'p1', contact_name: 'Pat B' },
  ])
  assert.equal(moved.updated, 1)
  const rows = await s.sql`
    select t.external_id, t.name, t.attributes, t.metrics, c.external_id as customer from contacts t
    join customers c on c.account_id = t.account_id and c.service_id = t.customer_id
      where t.account_id = ${a.id}`
  assert.deepEqual(
    rows.map((r) => ({ ...r })),
    [
      {
        external_id: 'p1',
        name: 'Pat B',
        attributes: { role: 'cto' },
        metrics: { sessions: 3 },
        customer: 'c2',
      },
    ],
  )
})

test('service_id is assigned once and never changes; createdAt stays, updatedAt moves', async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [customer(1)])
  const [before] =
    await s.sql`select service_id, created_at, updated_at from customers where account_id = ${a.id}`
  await upload(a.api, [customer(1, { name: 'Again' })])
  const [after] =
    await s.sql`select service_id, created_at, updated_at from customers where account_id = ${a.id}`
  assert.equal(after.service_id, before.service_id)
  assert.equal(after.created_at.getTime(), before.created_at.getTime())
  assert.ok(after.updated_at > before.updated_at)
})

test('processing is idempotent: a second run of the same job changes nothing', async () => {
  const a = await scoredAccount(s)
  const done = await upload(a.api, [customer(1, { metrics: [{ date: '2026-01-01', logins: 1 }] })])
  await waitForUpload(a.api, done.upload_id, 30_000, true)
  const snapshot = async () =>
    JSON.stringify(
      await s.sql`
    select (select json_agg(c order by service_id) from customers c where account_id = ${a.id})
      as c,
           (select count(*) from notifications where account_id = ${a.id}) as n,
           (select count(*) from customer_snapshots where account_id = ${a.id}) as s`,
    )
  const before = await snapshot()
  await s.sql`select graphile_worker.add_job('process_upload',
    json_build_object('account_id', ${a.id}::bigint, 'upload_id', ${done.upload_id}::bigint))`
  for (let i = 0; i < 100; i++) {
    const [{ n }] = await s.sql`select count(*)::int as n from graphile_worker.jobs
        where task_identifier = 'process_upload'`
    if (n === 0) break
    await new Promise((r) => setTimeout(r, 50))
  }
  assert.equal(await snapshot(), before)
})

test('every user of the account is notified of a processed upload', async () => {
  const a = await scoredAccount(s)
  await s.admin('POST', `/accounts/${a.id}/users`, { email: 'second@acme.test' })
  const done = await upload(a.api, [customer(1), customer(2)])
  const rows = await s.sql`select user_id, kind, body from notifications where account_id = ${a.id}
      order by user_id`
  assert.equal(rows.length, 2)
  for (const r of rows) {
    assert.equal(r.kind, 'import.processed')
    assert.equal(r.body.upload_id, done.upload_id)
    assert.equal(r.body.created, 2)
    assert.equal(r.body.records, 'customers')
  }
  const listed = await s.admin('GET', `/accounts/${a.id}/notifications?user_email=SECOND@acme.test`)
  assert.equal(listed.status, 200)
  assert.deepEqual(
    listed.body.map((n: any) => [n.user_email, n.kind, n.body.upload_id]),
    [['second@acme.test', 'import.processed', done.upload_id]],
  )
  assert.equal((await s.admin('GET', `/accounts/${a.id}/notifications`)).body.length, 2)
})

test("GET /api/v1/uploads/{id}: state and counts, 404 for another account's upload", async () => {
  const a = await scoredAccount(s)
  const b = await scoredAccount(s, 'Other')
  const done = await upload(a.api, [customer(1)])
  assert.equal(done.kind, 'customers')
  assert.equal(done.status, 'processed')
  assert.ok(done.processed_at >= done.received_at)
  assert.equal((await b.api(`/api/v1/uploads/${done.upload_id}`, undefined, 'GET')).status, 404)
  assert.equal((await a.api('/api/v1/uploads/999999', undefined, 'GET')).status, 404)
})

const singleCustomerTitle =
  'single customer: create (201, 409 again), read, update, churn by hand, delete with its contacts; also under /v1'
test(singleCustomerTitle, async () => {
  const a = await scoredAccount(s)
  const created = await a.api('/api/v1/customer', {
    external_id: 'solo/1',
    name: 'Solo',
    owner_email: 'owner@acme.test',
    attributes: { country: 'DE' },
    metrics: [{ date: '2026-01-01', logins: 4 }],
  })
  assert.equal(created.status, 201, JSON.stringify(created.body))
  assert.equal(created.body.id, 'solo/1')
  assert.equal(typeof created.body.service_id, 'number')
  assert.equal(created.body.owner, 'owner@acme.test')
  assert.deepEqual(created.body.properties, { country: 'DE', logins: 4 })
  assert.equal((await a.api('/api/v1/customer', { external_id: 'solo/1', name: 'x' })).status, 409)
  const path = `/api/v1/customer/${encodeURIComponent('solo/1')}`
  const read = await a.api(path, undefined, 'GET')
  assert.equal(read.status, 200)
  assert.equal(read.body.service_id, created.body.service_id)
  assert.deepEqual(
    (await a.api(`/v1/customer/${encodeURIComponent('solo/1')}`, undefined, 'GET')).body.service_id,
    created.body.service_id,
  )
  const updated = await a.api(
    path,
    { name: 'Solo 2', owner_email: null, attributes: { country: null, has_sso: true } },
    'PUT',
  )
  assert.equal(updated.status, 200, JSON.stringify(updated.body))
  assert.equal(updated.body.name, 'Solo 2')
  assert.equal(updated.body.owner, null)
  assert.deepEqual(updated.body.properties, { has_sso: true, logins: 4 })
  const churned = await a.api(path, { is_churned: true, churned_date: '2026-03-01' }, 'PUT')
  assert.equal(churned.body.is_churned, true)
  const [row] =
    await s.sql`select to_char(churned_date, 'YYYY-MM-DD') as d, churn_reason from customers
      where account_id = ${a.id}`
  assert.deepEqual({ ...row }, { d: '2026-03-01', churn_reason: 'manual' })
  assert.equal((await a.api(path, { is_churned: false }, 'PUT')).body.is_churned, false)
  assert.deepEqual(paths(await a.api(path, { owner_email: 'ghost@acme.test' }, 'PUT')), [
    '/owner_email',
  ])
  assert.deepEqual(paths(await a.api(path, { attributes: { has_sso: 'yes' } }, 'PUT')), [
    '/attributes/has_sso',
  ])
  assert.deepEqual(paths(await a.api(path, { churned_date: 'soon' }, 'PUT')), ['/churned_date'])
  assert.equal(
    (await s.call('PUT', path, '{}', { 'service-key': a.token, 'content-type': 'text/plain' }))
      .status,
    406,
  )
  await a.api(`${path}/contact`, { contact_external_id: 'kid', contact_name: 'Kid' })
  assert.equal((await a.api(path, undefined, 'DELETE')).status, 204)
  assert.equal((await a.api(path, undefined, 'GET')).status, 404)
  assert.equal((await a.api(path, undefined, 'DELETE')).status, 404)
  const [{ n }] = await s.sql`select count(*)::int as n from contacts where account_id = ${a.id}`
  assert.equal(n, 0)
})

test('single contact: create under its customer, read, update, delete, 404s', async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [customer(1), customer(2)])
  assert.equal(
    (await a.api('/api/v1/customer/nope/contact', { contact_external_id: 'p', contact_name: 'x' }))
      .status,
    404,
  )
  const created = await a.api('/api/v1/customer/c1/contact', {
    contact_external_id: 'p1',
    contact_name: 'Pat',
    attributes: { role: 'cto' },
  })
  assert.equal(created.status, 201, JSON.stringify(created.body))
  assert.equal(created.body.customer_external_id, 'c1')
  assert.equal(typeof created.body.customer_service_id, 'number')
  assert.deepEqual(created.body.tags, [])
  assert.equal(
    (await a.api('/api/v1/customer/c1/contact', { contact_external_id: 'p1', contact_name: 'x' }))
      .status,
    409,
  )
  assert.equal((await a.api('/api/v1/customer/c1/contact/p1', undefined, 'GET')).body.name, 'Pat')
  assert.equal(
    (await a.api('/api/v1/customer/c2/contact/p1', undefined, 'GET')).status,
    404,
    'only under its own customer',
  )
  const updated = await a.api(
    '/v1/customer/c1/contact/p1',
    { contact_name: 'Pat B', attributes: { role: null } },
    'PUT',
  )
  assert.equal(updated.status, 200)
  assert.equal(updated.body.name, 'Pat B')
  assert.deepEqual(updated.body.properties, {})
  assert.equal((await a.api('/api/v1/customer/c2/contact/p1', {}, 'PUT')).status, 404)
  assert.equal((await a.api('/api/v1/customer/c1/contact/p1', undefined, 'DELETE')).status, 204)
  assert.equal((await a.api('/api/v1/customer/c1/contact/p1', undefined, 'GET')).status, 404)
})

test("tenants never see or touch each other's records", async () => {
  const a = await scoredAccount(s, 'A')
  const b = await scoredAccount(s, 'B')
  await upload(a.api, [customer(1, { name: 'Mine', attributes: { country: 'US' } })])
  await upload(b.api, [customer(1, { name: 'Theirs' })])
  // One account a statement: the service's pool refuses a fan-out in the Citus pass.
  const rows = (
    await Promise.all(
      [a.id, b.id].map(
        (id) =>
          s.sql`select account_id, name, attributes from customers where external_id = 'c1'
            and account_id = ${id}`,
      ),
    )
  ).flat()
  assert.deepEqual(
    rows.map((r) => [r.account_id, r.name, r.attributes]),
    [
      [a.id, 'Mine', { country: 'US' }],
      [b.id, 'Theirs', {}],
    ],
  )
  await upload(a.api, [customer(9)])
  assert.equal((await b.api('/api/v1/customer/c9', undefined, 'GET')).status, 404)
  assert.equal((await b.api('/api/v1/customer/c9', { name: 'hijack' }, 'PUT')).status, 404)
  assert.equal((await b.api('/api/v1/customer/c9', undefined, 'DELETE')).status, 404)
  assert.equal(
    (await b.api('/api/v1/customer/c9/contact', { contact_external_id: 'x', contact_name: 'x' }))
      .status,
    404,
  )
  const contacts = await uploadContacts(b.api, [
    { customer_external_id: 'c9', contact_external_id: 'x', contact_name: 'x' },
  ])
  assert.equal(contacts.ignored, 1, "a contact cannot attach to another account's customer")
  assert.equal((await a.api('/api/v1/customer/c9', undefined, 'GET')).body.name, 'Customer 9')
})

const filedWritesTitle =
  '406 also for single-record updates and deletes of an account whose records are owned elsewhere; nothing changes'
test(filedWritesTitle, async () => {
  const file = await s.account('Filed writes', { source_of_truth: 'FILE' })
  const [c] = await s.sql`insert into customers (account_id, external_id, name)
      values (${file.id}, 'f1', 'Filed')
    returning service_id`
  await s.sql`insert into contacts (account_id, external_id, customer_id, name)
    values (${file.id}, 'fp', ${c.service_id}, 'Person')`
  const before = await s.sql`select name, updated_at from customers where account_id = ${file.id}
    union all select name, updated_at from contacts where account_id = ${file.id}`
  for (const [path, body] of [
    ['/api/v1/customer/f1', { name: 'x' }],
    ['/v1/customer/f1/contact/fp', { contact_name: 'x' }],
  ] as const) {
    for (const res of [
      await file.api(path, body, 'PUT'),
      await file.api(path, undefined, 'DELETE'),
    ]) {
      assert.equal(res.status, 406, JSON.stringify(res.body))
      assert.match(res.body.detail, /FILE/)
    }
  }
  assert.deepEqual(
    await s.sql`select name, updated_at from customers where account_id = ${file.id}
      union all select name, updated_at from contacts where account_id = ${file.id}`,
    before,
  )
})

test('a malformed percent escape in a record path is a 404, not a 500', async () => {
  const a = await scoredAccount(s)
  for (const [method, path] of [
    ['GET', '/api/v1/customer/%E0%A4%A'],
    ['PUT', '/v1/customer/%zz'],
    ['DELETE', '/api/v1/customer/c1/contact/%E0%A4%A'],
    ['GET', '/api/v1/customer/%/contact/p'],
  ]) {
    const res = await a.api(path, method === 'PUT' ? { name: 'x' } : undefined, method)
    assert.equal(res.status, 404, `${method} ${path}: ${JSON.stringify(res.body)}`)
    assert.equal(res.body.status, 404)
  }
})

test('strings PostgreSQL cannot store are a 400 naming the field, in uploads and single records', async () => {
  const a = await scoredAccount(s)
  for (const bad of ['nul \u0000 byte', 'lone \ud800 surrogate']) {
    const res = await a.api('/api/v1/customers', {
      customers: [customer(1), customer(2, { name: bad })],
    })
    assert.equal(res.status, 400, JSON.stringify(res.body))
    assert.deepEqual(paths(res), ['/customers/1/name'])
    const attr = await a.api('/api/v1/customers', {
      customers: [customer(3, { attributes: { country: bad } })],
    })
    assert.equal(attr.status, 400, JSON.stringify(attr.body))
    assert.deepEqual(paths(attr), ['/customers/0/attributes/country'])
    const single = await a.api('/api/v1/customer', customer(4, { name: bad }))
    assert.equal(single.status, 400, JSON.stringify(single.body))
    assert.deepEqual(paths(single), ['/name'])
  }
  assert.equal(
    (await s.sql`select count(*)::int as n from uploads where account_id = ${a.id}`)[0].n,
    0,
  )
})

test('an ignored contact changes nothing: not its snapshots, not its metrics', async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [customer(1)])
  await uploadContacts(a.api, [
    {
      customer_external_id: 'c1',
      contact_external_id: 'p1',
      contact_name: 'P',
      metrics: [{ date: '2026-01-01', sessions: 1 }],
    },
  ])
  const state = () => s.sql`
    select t.metrics, t.updated_at, s.date, s."values" from contacts t
      join contact_snapshots s on s.account_id = t.account_id and s.contact_id = t.service_id
    where t.account_id = ${a.id} order by s.date`
  const before = await state()
  assert.equal(before.length, 1)
  const result = await uploadContacts(a.api, [
    {
      customer_external_id: 'ghost',
      contact_external_id: 'p1',
      contact_name: 'P',
      metrics: [
        { date: '2026-01-01', sessions: 9 },
        { date: '2026-02-01', sessions: 9 },
      ],
    },
  ])
  assert.equal(result.ignored, 1)
  assert.deepEqual(await state(), before)
})

test('creates of one new id at once: one 201, the others 409, never a 500', async () => {
  const a = await scoredAccount(s)
  const answers = await Promise.all(
    Array.from({ length: 6 }, () => a.api('/api/v1/customer', customer(77))),
  )
  assert.deepEqual(
    answers.map((r) => r.status).sort(),
    [201, 409, 409, 409, 409, 409],
    JSON.stringify(answers.map((r) => r.body)),
  )
  assert.equal(
    (
      await s.sql`select count(*)::int as n from customers where account_id = ${a.id}
        and external_id = 'c77'`
    )[0].n,
    1,
  )
})

test('a bulk import has the tables it grew analyzed, so plans follow their real size', async () => {
  const q = await startTestService({ apiRateLimit: 100_000 })
  try {
    const a = await scoredAccount(q)
    const analyzed = async () =>
      (
        await q.sql`
      select relname from pg_stat_user_tables where relname in ('customers', 'customer_snapshots')
        and last_analyze is not null order by 1`
      ).map((r) => r.relname)
    assert.deepEqual(await analyzed(), [])
    // Two small uploads change too little to be worth an analyze.
    for (let i = 0; i < 2; i++)
      await upload(a.api, [customer(i, { metrics: [{ date: '2026-01-01', logins: 1 }] })])
    await new Promise((r) => setTimeout(r, 1500))
    assert.deepEqual(await analyzed(), [])
    // Names long enough that the customers table doubles several times over the uploads (each new
    // customer is written once), whenever autovacuum set its page count.
    for (let n = 0; n < 8; n++) {
      await upload(
        a.api,
        Array.from({ length: 1000 }, (_, i) =>
          customer(1000 * (n + 1) + i, {
            name: `Customer ${1000 * (n + 1) + i} ${'of a long name '.repeat(12)}`,
            metrics: ['2026-01-01', '2026-02-01', '2026-03-01'].map((date) => ({
              date,
              logins: i,
            })),
          }),
        ),
      )
    }
    await eventually(
      async () => (await analyzed()).length === 2,
      'customers and customer_snapshots analyzed',
    )
    // Analyzed whenever the table doubled, the estimate stays within half of the truth, give or
    // take the upload whose job was still waiting. On Citus the coordinator's customers is an empty
    // shell, and the table-wide rule reads no shard (src/db/analyze.ts): there the estimate is the
    // one the account's query is planned with, its routed task's, on its shard's statistics.
    // On a session of its own: the service's pool refuses a fan-out in the Citus pass.
    const look = connect(q.url, { max: 1 })
    const [{ citus }] =
      await look`select exists (select from pg_extension where extname = 'citus') as citus`
    const [plan] =
      await look`explain (format json) select from customers where account_id = ${a.id}`
    const [{ reltuples }] =
      await look`select reltuples::int from pg_class where relname = 'customers'`
    const estimate = citus
      ? Number(
          plan['QUERY PLAN'][0].Plan['Distributed Query'].Job.Tasks[0]['Remote Plan'][0][0].Plan[
            'Plan Rows'
          ],
        )
      : reltuples
    const [{ actual }] = await look`select count(*)::int as actual from customers`
    await look.end()
    assert.ok(
      estimate + 1000 >= actual / 2,
      `the planner's row estimate follows the table: ${estimate} of ${actual}`,
    )
  } finally {
    await q.stop()
  }
})

test('a record another request creates while an upload merges it still gets the upload fields', async () => {
  const a = await scoredAccount(s)
  await upload(a.api, [customer(1, { external_id: 'race-held' })])
  // The upload's update of race-held waits in a trigger for a lock the test holds, on every node
  // (on Citus a distributed table's trigger runs on its shard's node): between that update and the
  // insert of race-new, a single create of race-new commits, as a request might at any time.
  const nodes = clusterFromEnv()?.map((n) =>
    Object.assign(new URL(n.url), { pathname: new URL(s.url).pathname }),
  )
  const holders = await Promise.all(
    (nodes ?? [new URL(s.url)]).map(async (url) => connect(url.toString(), { max: 1 })),
  )
  const held = await Promise.all(holders.map((h) => h.reserve()))
  await Promise.all(held.map((h) => h`select pg_advisory_lock(4242)`))
  await s.sql`create function hold_race() returns trigger language plpgsql as $$ begin
      perform pg_advisory_lock(4242); perform pg_advisory_unlock(4242); return new; end $$`
  await s.sql.begin(async (tx) => {
    await tx`set local citus.enable_unsafe_triggers = on`
    await tx`create trigger hold_race after update on customers for each row
      when (new.external_id = 'race-held') execute function hold_race()`
  })
  try {
    const items = [
      { external_id: 'race-held', name: 'Held' },
      {
        external_id: 'race-new',
        name: 'From the upload',
        metrics: [{ date: '2026-01-01', logins: 7 }],
      },
    ]
    const sent = await a.api('/api/v1/customers', { customers: items })
    assert.equal(sent.status, 200, JSON.stringify(sent.body))
    await eventually(
      async () =>
        (
          await s.sql`select 1 from pg_stat_activity where application_name = 'service-worker'
            and state = 'active'
          and query like '%update customers c set name%'`
        ).length > 0,
      "the upload's update waiting",
    )
    const single = await a.api('/api/v1/customer', {
      external_id: 'race-new',
      name: 'From the single create',
    })
    assert.equal(single.status, 201, JSON.stringify(single.body))
    await Promise.all(held.map((h) => h`select pg_advisory_unlock(4242)`))
    assert.equal((await waitForUpload(a.api, sent.body.upload_id)).status, 'processed')
    const got = await a.api('/api/v1/customer/race-new', undefined, 'GET')
    assert.equal(got.body.name, 'From the upload')
    const [{ n }] = await s.sql`select count(*)::int as n from customer_snapshots p join customers c
      on c.account_id = p.account_id and c.service_id = p.customer_id
      where c.account_id = ${a.id} and c.external_id = 'race-new' and p.date = '2026-01-01'
        and p."values"->>'logins' = '7'`
    assert.equal(n, 1)
  } finally {
    for (const h of held) h.release()
    await Promise.all(holders.map((h) => h.end()))
    await s.sql.begin(async (tx) => {
      await tx`set local citus.enable_unsafe_triggers = on`
      await tx`drop trigger if exists hold_race on customers`
    })
    await s.sql`drop function if exists hold_race()`
  }
})
