// Tenant isolation across every route of the routing table: account B, with its own key or its own
// account id in the admin API, tries to reach account A's records and sub-resources. Every route
// must have a case here (the last test compares the cases with the table), and after every case
// all of A's rows in every tenant table must be exactly what they were.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { routes } from '../src/api/routes.ts'
import { newSecret } from '../src/people/secrets.ts'
import type { Route } from '../src/route.ts'
import { ADMIN_TOKEN, startTestService, type Call, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually, startReceiver, type Receiver } from './helpers/receiver.ts'
import { search } from './helpers/search.ts'
import { deliveryJobs, listDeliveries, settled, subscribe, upload } from './helpers/webhooks.ts'

type Account = Awaited<ReturnType<TestService['account']>>
type Case = (route: Pick<Route, 'method' | 'path'>) => Promise<void>

// Routes that read or write no account's data.
const NO_TENANT_DATA = [
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  'GET /openapi.json',
  'GET /docs',
  'GET /docs/reference.js',
  'GET /console',
  'GET /console/console.js',
  'GET /console/console.css',
  'GET /admin/v1/event-types',
  // The operator's backups: the whole database, for the admin token only, never one account's view.
  'GET /admin/v1/backups',
  'POST /admin/v1/backups',
  // The operator's audit entries that name no account (backups).
  'GET /admin/v1/audit',
]

let s: TestService
let receiver: Receiver
let a: Account
let b: Account
// A's sub-resources that B reaches for, and B's own webhook.
const A = {
  key: 0,
  hook: 0,
  delivery: 0,
  upload: 0,
  customer: 0,
  contact: 0,
  segment: 0,
  erasure: 0,
  user: 0,
  ssoState: '',
}
let bHook = 0
// B's admin, signed in: the cookie and CSRF headers of its requests.
let bAdmin: Record<string, string>
const PASSWORD = 'isolation password'
const signedIn = async (accountId: number, email: string) => {
  const made = await status(
    201,
    s.admin('POST', `/accounts/${accountId}/users`, { email, role: 'admin' }),
  )
  await status(
    200,
    s.call('POST', '/auth/v1/password', { token: made.body.invite_token, password: PASSWORD }),
  )
  const res = await status(200, s.call('POST', '/auth/v1/sign-in', { email, password: PASSWORD }))
  const cookie = /service_session=([^;]*)/.exec(res.headers.get('set-cookie')!)![1]
  return {
    cookie: `service_session=${cookie}`,
    'x-csrf-token': res.body.csrf_token,
    origin: s.base,
  }
}
const asBAdmin = (method: string, path: string, body?: unknown) =>
  s.call(method, path, body, bAdmin)
// B's key with the erase scope, which the default keys do not have.
let bEraser: ReturnType<TestService['api']>
const DAY = '2026-01-01'

const status = async (expected: number, pending: Promise<Call>) => {
  const res = await pending
  assert.equal(res.status, expected, JSON.stringify(res.body))
  return res
}
// Segment's HTTP Tracking API, with the key as the Basic user name as the SDKs send it.
const relayBatch = (account: Account, batch: unknown[], path = '/v1/batch') =>
  s.call('POST', path, path === '/v1/batch' ? { batch } : batch[0], {
    authorization: `Basic ${Buffer.from(`${account.token}:`).toString('base64')}`,
  })
const get = (account: Account, path: string) => account.api(path, undefined, 'GET')
const del = (account: Account, path: string) => account.api(path, undefined, 'DELETE')
const results = async (pending: Promise<Call>) => (await status(200, pending)).body.results as any[]
const errorPaths = async (pending: Promise<Call>) =>
  (await status(400, pending)).body.errors.map((e: { path: string }) => e.path)

// Fills a route pattern's parameters; a parameter this file does not know fails, so that a new
// kind of sub-resource gets a deliberate cross-tenant value.
const fill = (path: string, params: Record<string, string | number>) =>
  path.replace(/:(\w+)/g, (_, name: string) => {
    assert.ok(name in params, `no value for :${name} in ${path}`)
    return encodeURIComponent(params[name])
  })
const asAdmin = (
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` },
) =>
  s.call(
    method,
    path,
    body === undefined && (method === 'POST' || method === 'PUT') ? {} : body,
    headers,
  )
const aParams = () => ({
  key_id: A.key,
  webhook_id: A.hook,
  delivery_id: A.delivery,
  upload_id: A.upload,
  segment_id: A.segment,
  erasure_id: A.erasure,
  user_id: A.user,
  external_id: 'only-a',
  entity: 'customer',
  codename: 'a_secret',
})
// The route called on account B's id with A's sub-resource ids.
const inB = (
  route: Pick<Route, 'method' | 'path'>,
  body?: unknown,
  params: Record<string, string> = {},
  query = '',
) => asAdmin(route.method, fill(route.path, { ...aParams(), id: b.id, ...params }) + query, body)

// Every row of the account in every table with an account_id column, plus its accounts row: a write
// through another tenant shows up wherever it lands, in tables added later too. Rate-limit counters
// are left out: they count A's own requests that prove its key still works; so are the kept This
// week reports, a cache that A's own refresh job rewrites whenever A's writes or the day ask for it
// (the report's own case below checks that B never sees A's).
const tenantRows = async (accountId: number) => {
  const tables = (
    await s.sql`
    select table_name as t from information_schema.columns
    where table_schema = 'public' and column_name = 'account_id'
      and table_name not in ('rate_limit_counters', 'week_reports') order by 1`
  ).map((r) => r.t as string)
  assert.ok(tables.length >= 15, tables.join())
  const rows = tables.map(
    (t) =>
      `, '${t}', (select coalesce(json_agg(x order by x::text), '[]') from "${t}" x where account_id = $1)`,
  )
  const [row] = await s.sql.unsafe(
    `select json_build_object('accounts', (select row_to_json(x) from accounts x where id = $1)` +
      `${rows.join('')}) as rows`,
    [accountId],
  )
  return row.rows as Record<string, unknown>
}

// Scoring, delivery and apply jobs of the account all done, so that its rows stop moving.
const quiet = (accountId: number) =>
  eventually(
    async () =>
      (
        await s.sql`
  select count(*)::int as n from graphile_worker._private_jobs
    where payload->>'account_id' = ${String(accountId)}`
      )[0].n === 0,
    `jobs of ${accountId}`,
  )

// The ids a list route shows must be exactly the account's own rows of that table.
const ownIds = async (table: string, accountId: number) =>
  (await s.sql`select id from ${s.sql(table)} where account_id = ${accountId} order by id`).map(
    (r) => r.id as number,
  )
const sorted = (ids: number[]) => [...ids].sort((x, y) => x - y)
const listedIds = (items: { id: number }[]) => sorted(items.map((i) => i.id))

const track = (account: Account, trackerKey: string, customer: string) =>
  account.api('/api/tracker/track', {
    trackerKey,
    events: [
      {
        name: 'login',
        timestamp: Date.now(),
        identification: { customer, contact: 'a-contact' },
        data: { customer: { country: 'DE' } },
      },
    ],
  })
const eventsApplied = (account: Account) =>
  eventually(
    async () =>
      (await s.admin('GET', `/accounts/${account.id}/events`)).body.by_status.received === 0,
    `events of ${account.id} applied`,
  )

before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
  receiver = await startReceiver()
  a = await scoredAccount(s, 'A')
  b = await scoredAccount(s, 'B')
  // A's own model, user, property and tags, so that B's reads could not pass for A's by chance.
  await status(
    201,
    s.admin('POST', `/accounts/${a.id}/properties`, {
      entity: 'customer',
      kind: 'attribute',
      codename: 'a_secret',
      type: 'string',
    }),
  )
  await status(
    200,
    s.admin('PUT', `/accounts/${a.id}/scoring`, {
      customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 10 }] },
      contact: { engagement: [{ codename: 'sessions', weight: 100, bad: 0, good: 10 }] },
    }),
  )
  await status(
    200,
    s.admin('PUT', `/accounts/${a.id}/score-alerts`, { engagementscore: { delta: 1 } }),
  )
  // A's user signed in (a session) and with a link still open (a token); B's admin signed in.
  const ann = (
    await status(201, s.admin('POST', `/accounts/${a.id}/users`, { email: 'ann@a.test' }))
  ).body
  A.user = ann.id
  await status(
    200,
    s.call('POST', '/auth/v1/password', { token: ann.invite_token, password: PASSWORD }),
  )
  await status(200, s.call('POST', '/auth/v1/sign-in', { email: 'ann@a.test', password: PASSWORD }))
  await status(201, s.admin('POST', `/accounts/${a.id}/users/${A.user}/reset`))
  bAdmin = await signedIn(b.id, 'boss@b.test')
  // A's SSO and a sign-in of A's under way (written as the start writes it: no provider runs here).
  const sso = {
    issuer: 'https://idp.a.test',
    client_id: 'a',
    client_secret: 's',
    domains: ['a.test'],
  }
  await status(200, s.admin('PUT', `/accounts/${a.id}/sso`, { ...sso, default_role: 'viewer' }))
  const pending = newSecret(a.id)
  A.ssoState = pending.secret
  await s.sql`insert into sso_logins (account_id, state_hash, issuer, nonce, code_verifier,
    expires_at)
    values (${a.id}, ${pending.hash}, ${sso.issuer}, 'n', 'v', now() + interval '1 hour')`
  for (const [account, titles] of [
    [a, ['Gold', 'Silver']],
    [b, ['Bronze']],
  ] as const) {
    for (const title of titles)
      await status(201, s.admin('POST', `/accounts/${account.id}/tags`, { title }))
    await status(
      200,
      s.admin('PUT', `/accounts/${account.id}/tracking`, { domains: [`${account.id}.example`] }),
    )
  }
  A.hook = (await subscribe(s, a.id, receiver.url)).hookId
  bHook = (await subscribe(s, b.id, receiver.url)).hookId

  A.upload = (
    await upload(a, [
      { external_id: 'shared-1', name: 'A Shared', metrics: [{ date: DAY, logins: 1 }] },
      {
        external_id: 'only-a',
        name: 'A Only',
        attributes: { a_secret: 's' },
        metrics: [{ date: DAY, logins: 2 }],
      },
    ])
  ).upload_id
  await upload(
    a,
    [
      {
        customer_external_id: 'only-a',
        contact_external_id: 'a-contact',
        contact_name: 'A Contact',
        metrics: [{ date: DAY, sessions: 3 }],
      },
    ],
    'contacts',
  )
  await upload(b, [{ external_id: 'shared-1', name: 'B Shared' }])
  await status(200, s.admin('PUT', `/accounts/${a.id}/customers/only-a/tags`, { titles: ['Gold'] }))
  await status(
    200,
    s.admin('PUT', `/accounts/${a.id}/contacts/a-contact/tags`, { titles: ['Gold'] }),
  )
  await status(200, track(a, a.trackerKey, 'only-a'))
  // A Segment group with a trait no property defines: A's messages and its counts of dropped keys.
  await status(
    200,
    relayBatch(a, [
      { type: 'group', messageId: 'a-m1', groupId: 'only-a', traits: { contry: 'x' } },
    ]),
  )
  // A churn and its reactivation: A's churn events.
  for (const is_churned of [true, false])
    await status(200, a.api('/api/v1/customer/only-a', { is_churned }, 'PUT'))
  await eventsApplied(a)

  A.delivery = (await settled(s, a, A.hook, 1))[0].id
  await settled(s, b, bHook, 1)
  A.key = (await s.admin('GET', `/accounts/${a.id}/keys`)).body[0].id
  // A's segment, on A's own property, with its one member recorded.
  A.segment = (
    await status(201, a.api('/api/v1/segments', { name: 'Secret', filters: [SECRET_KNOWN] }))
  ).body.id
  await eventually(
    async () => (await get(a, `/api/v1/segments/${A.segment}`)).body.members === 1,
    "A's segment recomputed",
  )
  const [ids] = await s.sql`
    select (select service_id from customers where account_id = ${a.id} and external_id = 'only-a')
      as customer,
           (select service_id from contacts where account_id = ${a.id}
             and external_id = 'a-contact') as contact`
  Object.assign(A, ids)
  // A's erasure of a customer it never had: its log row and its suppression.
  A.erasure = (
    await status(202, s.admin('POST', `/accounts/${a.id}/erasures`, { customers: ['gone-a'] }))
  ).body.id
  await eventually(
    async () =>
      (await s.admin('GET', `/accounts/${a.id}/erasures/${A.erasure}`)).body.status === 'done',
    "A's erasure",
  )
  bEraser = s.api(
    (await status(201, s.admin('POST', `/accounts/${b.id}/keys`, { scopes: ['erase'] }))).body
      .token,
  )
  // B's jobs too: its upload's scoring, finishing during a case (slower on Citus), would
  // change B's rows.
  await quiet(a.id)
  await quiet(b.id)
  // A's kept This week report.
  await status(200, get(a, '/api/v1/insights/week'))
  // A's churn model row: a training that failed, as the job records one (too few labels to train).
  await s.sql`insert into churn_models (account_id, status, started_at, error)
    values (${a.id}, 'failed', now(), 'A only')`
  // A table where A has nothing would let any write through B go unseen. An erasure's targets are
  // kept only until its job runs.
  for (const [table, rows] of Object.entries(await tenantRows(a.id)))
    assert.ok(
      !Array.isArray(rows) || rows.length > 0 || table === 'erasure_targets',
      `A has no rows in ${table}`,
    )
})
after(async () => {
  await s.stop()
  await receiver.close()
})

const cases = new Map<string, Case>()
const on = (method: Route['method'], path: string, run: Case) => cases.set(`${method} ${path}`, run)

// ---- public API with B's key --------------------------------------------------------------------

on('POST', '/api/v1/customers/search', async () => {
  const found = await results(search(b, 'customers'))
  const own = await s.sql`select service_id from customers where account_id = ${b.id}`
  assert.deepEqual(sorted(found.map((r) => r.service_id)), sorted(own.map((r) => r.service_id)))
  assert.ok(!found.some((r) => r.id === 'only-a'))
  assert.equal(found.find((r) => r.id === 'shared-1').name, 'B Shared')
  assert.deepEqual(
    await results(
      search(b, 'customers', {
        filters: [{ propertyName: 'name', operator: 'EQ', value: 'A Only' }],
      }),
    ),
    [],
  )
  // A's tag title names no tag of B.
  assert.deepEqual(
    await results(
      search(b, 'customers', {
        filters: [{ propertyName: 'tags', operator: 'EQ', value: 'Gold' }],
      }),
    ),
    [],
  )
  assert.deepEqual(await errorPaths(search(b, 'customers', { after: A.customer })), ['/after'])
  // A's sorted cursor is sealed for A: B's same search refuses it.
  const sort = [{ propertyName: 'name' }]
  const cursor = (await status(200, search(a, 'customers', { sort, limit: 1 }))).body.paging.next
    .after
  assert.deepEqual(await errorPaths(search(b, 'customers', { sort, limit: 1, after: cursor })), [
    '/after',
  ])
})

on('POST', '/api/v1/customers/aggregate', async () => {
  const aggregate = (body: unknown) => b.api('/api/v1/customers/aggregate', body)
  const [own] = await s.sql`select count(*)::int as n from customers where account_id = ${b.id}
      and not is_churned`
  const all = (await status(200, aggregate({ fields: ['logins'], matrix: 'points' }))).body
  assert.equal(all.count, own.n)
  // A's customers have logins and scores; B's do not.
  assert.deepEqual([all.fields[0].count, all.points.scored, all.points.items], [0, 0, []])
  const gold = {
    filters: [{ propertyName: 'tags', operator: 'EQ', value: 'Gold' }],
    matrix: 'grid',
  }
  assert.equal((await status(200, aggregate(gold))).body.count, 0)
  // A's codename names no property of B.
  assert.deepEqual(await errorPaths(aggregate({ fields: ['a_secret'] })), ['/fields/0'])
})

on('POST', '/api/v1/contacts/search', async () => {
  assert.deepEqual(await results(search(b, 'contacts')), [])
  assert.deepEqual(
    await results(
      search(b, 'contacts', {
        filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'only-a' }],
      }),
    ),
    [],
  )
  assert.deepEqual(await errorPaths(search(b, 'contacts', { after: A.contact })), ['/after'])
})

on('POST', '/api/v1/customers', async () => {
  // 'shared-1' updates B's row only; 'only-a' is new to B, not a match of A's.
  const done = await upload(b, [
    {
      external_id: 'shared-1',
      name: 'B Shared',
      attributes: { country: 'DE' },
      metrics: [{ date: DAY, logins: 9 }],
    },
    { external_id: 'only-a', name: 'B Only', metrics: [{ date: DAY, logins: 9 }] },
  ])
  try {
    assert.deepEqual([done.created, done.updated], [1, 1])
    const [row] = await s.sql`select attributes from customers where account_id = ${b.id}
        and external_id = 'shared-1'`
    assert.deepEqual(row.attributes, { country: 'DE' })
  } finally {
    await status(204, del(b, '/api/v1/customer/only-a'))
  }
})

on('POST', '/api/v1/contacts', async () => {
  // A contact cannot attach to A's customer; A's contact id is new to B and is not moved.
  const done = await upload(
    b,
    [
      { customer_external_id: 'only-a', contact_external_id: 'b-orphan', contact_name: 'x' },
      {
        customer_external_id: 'shared-1',
        contact_external_id: 'a-contact',
        contact_name: 'B Contact',
        metrics: [{ date: DAY, sessions: 9 }],
      },
    ],
    'contacts',
  )
  try {
    assert.deepEqual([done.created, done.updated, done.ignored], [1, 0, 1])
  } finally {
    await status(204, del(b, '/api/v1/customer/shared-1/contact/a-contact'))
  }
})

on('GET', '/api/v1/uploads/:upload_id', async () => {
  await status(404, get(b, `/api/v1/uploads/${A.upload}`))
  await status(200, get(a, `/api/v1/uploads/${A.upload}`))
})

on('GET', '/api/v1/uploads', async () => {
  const listed = (await status(200, get(b, '/api/v1/uploads'))).body.map(
    (u: { upload_id: number }) => u.upload_id,
  )
  assert.deepEqual(sorted(listed), await ownIds('uploads', b.id))
  assert.ok(!listed.includes(A.upload))
})

on('GET', '/api/v1/customer/:external_id/events', async () => {
  const mine = (await status(200, get(b, '/api/v1/customer/only-a/events'))).body
  assert.equal(mine.count, 0)
  const own = (await status(200, get(a, '/api/v1/customer/only-a/events'))).body
  assert.ok(own.count > 0)
})

on('POST', '/api/tracker/track', async () => {
  const stored = await tenantRows(b.id)
  const refused = await status(403, track(b, a.trackerKey, 'only-a'))
  assert.match(refused.body.detail, /trackerKey/)
  assert.deepEqual(await tenantRows(b.id), stored, 'a refused request stores nothing')
  // With B's own tracker key, 'only-a' names no customer of B: kept unmatched, A's
  // record untouched.
  await status(200, track(b, b.trackerKey, 'only-a'))
  await eventsApplied(b)
  const [event] =
    await s.sql`select status from tracking_events where account_id = ${b.id} order by id desc
      limit 1`
  assert.equal(event.status, 'unmatched')
})

for (const p of ['/api/v1', '/v1']) {
  on('POST', `${p}/customer`, async () => {
    // 201, not 409: A's external id is unknown to B.
    const created = await status(
      201,
      b.api(`${p}/customer`, { external_id: 'only-a', name: 'B Only' }),
    )
    try {
      assert.notEqual(created.body.service_id, A.customer)
    } finally {
      await status(204, del(b, `${p}/customer/only-a`))
    }
  })
  on('GET', `${p}/customer/:external_id`, async () => {
    await status(404, get(b, `${p}/customer/only-a`))
    assert.equal((await status(200, get(b, `${p}/customer/shared-1`))).body.name, 'B Shared')
  })
  on('PUT', `${p}/customer/:external_id`, async () => {
    await status(404, b.api(`${p}/customer/only-a`, { name: 'hijacked', is_churned: true }, 'PUT'))
  })
  on('DELETE', `${p}/customer/:external_id`, async () => {
    await status(404, del(b, `${p}/customer/only-a`))
  })
  on('POST', `${p}/customer/:external_id/contact`, async () => {
    await status(
      404,
      b.api(`${p}/customer/only-a/contact`, { contact_external_id: 'b-new', contact_name: 'x' }),
    )
    // 201, not 409: A's contact id is unknown to B.
    await status(
      201,
      b.api(`${p}/customer/shared-1/contact`, {
        contact_external_id: 'a-contact',
        contact_name: 'B',
      }),
    )
    await status(204, del(b, `${p}/customer/shared-1/contact/a-contact`))
  })
  on('GET', `${p}/customer/:external_id/contact/:contact_id`, async () => {
    await status(404, get(b, `${p}/customer/only-a/contact/a-contact`))
    await status(404, get(b, `${p}/customer/shared-1/contact/a-contact`))
  })
  on('PUT', `${p}/customer/:external_id/contact/:contact_id`, async () => {
    await status(
      404,
      b.api(`${p}/customer/only-a/contact/a-contact`, { contact_name: 'hijacked' }, 'PUT'),
    )
  })
  on('DELETE', `${p}/customer/:external_id/contact/:contact_id`, async () => {
    await status(404, del(b, `${p}/customer/only-a/contact/a-contact`))
  })
}

const SECRET_KNOWN = { propertyName: 'a_secret', operator: 'KNOWN' }
const SEGMENTS = '/api/v1/segments'

on('POST', SEGMENTS, async () => {
  // A's property is unknown to B; A's segment name is free in B.
  assert.deepEqual(await errorPaths(b.api(SEGMENTS, { name: 'Secret', filters: [SECRET_KNOWN] })), [
    '/filters/0/propertyName',
  ])
  const own = await status(201, b.api(SEGMENTS, { name: 'Secret', filters: [] }))
  assert.notEqual(own.body.id, A.segment)
  await status(204, del(b, `${SEGMENTS}/${own.body.id}`))
})

on('GET', SEGMENTS, async () => {
  assert.deepEqual(
    listedIds((await status(200, get(b, SEGMENTS))).body),
    await ownIds('segments', b.id),
  )
})

on('GET', `${SEGMENTS}/:segment_id`, async () => {
  await status(404, get(b, `${SEGMENTS}/${A.segment}`))
})

on('PUT', `${SEGMENTS}/:segment_id`, async () => {
  await status(404, b.api(`${SEGMENTS}/${A.segment}`, { name: 'Taken over', filters: [] }, 'PUT'))
})

on('DELETE', `${SEGMENTS}/:segment_id`, async () => {
  await status(404, del(b, `${SEGMENTS}/${A.segment}`))
})

on('POST', `${SEGMENTS}/:segment_id/search`, async () => {
  await status(404, b.api(`${SEGMENTS}/${A.segment}/search`, {}))
})

on('GET', `${SEGMENTS}/:segment_id/history`, async () => {
  await status(404, get(b, `${SEGMENTS}/${A.segment}/history`))
})

// ---- admin API with B's account id --------------------------------------------------------------

const ACC = '/admin/v1/accounts'

on('POST', ACC, async () => {
  // A new account starts with nothing of anyone's but its key and the system properties.
  const c = await s.account('C')
  assert.notEqual(c.trackerKey, a.trackerKey)
  const {
    api_keys: keys,
    property_defs: defs,
    audit_entries: log,
    ...rest
  } = await tenantRows(c.id)
  assert.equal((keys as unknown[]).length, 1)
  // Its audit log holds its own making: the account and its key.
  assert.deepEqual((log as { action: string }[]).map((e) => e.action).sort(), [
    'createAccount',
    'createKey',
  ])
  assert.ok((defs as { system: boolean }[]).every((d) => d.system))
  for (const [table, rows] of Object.entries(rest))
    if (table !== 'accounts') assert.deepEqual(rows, [], table)
  assert.deepEqual(await results(search(c, 'customers')), [])
})

on('GET', `${ACC}/:id`, async (r) => {
  const read = (await status(200, inB(r))).body
  assert.deepEqual([read.id, read.name, read.tracker_key], [b.id, 'B', b.trackerKey])
})

on('POST', `${ACC}/:id/keys`, async (r) => {
  const key = (await status(201, inB(r))).body
  assert.ok(key.token.startsWith(`sk_${b.id}_`))
  await status(404, s.api(key.token)(`/api/v1/uploads/${A.upload}`, undefined, 'GET'))
})

on('GET', `${ACC}/:id/keys`, async (r) => {
  assert.deepEqual(listedIds((await status(200, inB(r))).body), await ownIds('api_keys', b.id))
})

on('DELETE', `${ACC}/:id/keys/:key_id`, async (r) => {
  await status(404, inB(r))
  await status(200, get(a, `/api/v1/uploads/${A.upload}`))
})

on('DELETE', `${ACC}/:id/properties/:entity/:codename`, async (r) => {
  // B has no a_secret; A's stays, and so does A's segment naming it.
  await status(404, inB(r))
  await status(200, get(a, `${SEGMENTS}/${A.segment}`))
})

on('POST', `${ACC}/:id/users`, async (r) => {
  // 201, not 409: A's user's email is free in B.
  await status(201, inB(r, { email: 'ann@a.test' }))
})

on('GET', `${ACC}/:id/users`, async (r) => {
  assert.deepEqual(listedIds((await status(200, inB(r))).body), await ownIds('users', b.id))
})

on('POST', `${ACC}/:id/properties`, async (r) => {
  await status(
    201,
    inB(r, { entity: 'contact', kind: 'attribute', codename: 'a_secret', type: 'boolean' }),
  )
})

on('GET', `${ACC}/:id/properties`, async (r) => {
  const listed = (await status(200, inB(r))).body.map(
    (p: { entity: string; codename: string }) => `${p.entity}.${p.codename}`,
  )
  const own = await s.sql`select entity, codename from property_defs where account_id = ${b.id}
      order by entity, codename`
  assert.deepEqual(
    listed,
    own.map((p) => `${p.entity}.${p.codename}`),
  )
})

on('POST', `${ACC}/:id/tags`, async (r) => {
  await status(201, inB(r, { title: 'Silver' }))
})

on('GET', `${ACC}/:id/tags`, async (r) => {
  assert.deepEqual(listedIds((await status(200, inB(r))).body), await ownIds('tags', b.id))
})

on('PUT', `${ACC}/:id/customers/:external_id/tags`, async (r) => {
  await status(404, inB(r, { titles: [] }))
  // A's tag title names no tag of B.
  assert.deepEqual(
    await errorPaths(
      s.admin('PUT', `/accounts/${b.id}/customers/shared-1/tags`, { titles: ['Gold'] }),
    ),
    ['/titles/0'],
  )
})

on('PUT', `${ACC}/:id/contacts/:external_id/tags`, async (r) => {
  await status(404, inB(r, { titles: [] }, { external_id: 'a-contact' }))
})

on('PUT', `${ACC}/:id/scoring`, async (r) => {
  await status(
    200,
    inB(r, { customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 5 }] } }),
  )
})

on('POST', `${ACC}/:id/scoring/preview`, async (r) => {
  const model = { customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 5 }] } }
  await status(404, inB(r, { model, external_id: 'only-a' }))
})

on('GET', ACC, async () => {
  // The admin token spans every account: the list is the accounts table, each as
  // get-account reads it.
  const listed = (await status(200, asAdmin('GET', ACC))).body
  const all = (await s.sql`select id from accounts order by id`).map((row) => row.id as number)
  assert.deepEqual(
    listed.map((x: { id: number }) => x.id),
    all,
  )
  const own = listed.find((x: { id: number }) => x.id === b.id)
  assert.deepEqual(own, (await status(200, asAdmin('GET', `${ACC}/${b.id}`))).body)
})

on('GET', `${ACC}/:id/scoring`, async (r) => {
  const [own] = await s.sql`select model from scoring_models where account_id = ${b.id}`
  assert.deepEqual((await status(200, inB(r))).body, own.model)
})

on('PUT', `${ACC}/:id/tracking`, async (r) => {
  const set = (await status(200, inB(r, { domains: ['b.example'] }))).body
  assert.deepEqual(
    [set.id, set.tracker_key, set.tracking_domains],
    [b.id, b.trackerKey, ['b.example']],
  )
})

on('POST', `${ACC}/:id/webhooks`, async (r) => {
  const hook = (await status(201, inB(r, { url: receiver.url, events: ['customer.created'] }))).body
  await status(204, s.admin('DELETE', `/accounts/${b.id}/webhooks/${hook.id}`))
})

on('GET', `${ACC}/:id/webhooks`, async (r) => {
  assert.deepEqual(listedIds((await status(200, inB(r))).body), await ownIds('webhooks', b.id))
})

on('DELETE', `${ACC}/:id/webhooks/:webhook_id`, async (r) => {
  await status(404, inB(r))
  assert.ok(
    (await s.admin('GET', `/accounts/${a.id}/webhooks`)).body.some(
      (h: { id: number }) => h.id === A.hook,
    ),
  )
})

on('POST', `${ACC}/:id/webhooks/:webhook_id/rotate-secret`, async (r) => {
  await status(404, inB(r))
})

on('POST', `${ACC}/:id/webhooks/:webhook_id/disable`, async (r) => {
  await status(404, inB(r))
})

on('POST', `${ACC}/:id/webhooks/:webhook_id/enable`, async (r) => {
  await status(404, inB(r))
})

on('PATCH', `${ACC}/:id/webhooks/:webhook_id`, async (r) => {
  await status(404, inB(r, { rate_limit: 1 }))
  const [hook] =
    await s.sql`select rate_limit from webhooks where account_id = ${a.id} and id = ${A.hook}`
  assert.equal(hook.rate_limit, null)
})

on('POST', `${ACC}/:id/webhooks/:webhook_id/test`, async (r) => {
  await status(404, inB(r, { event: 'customer.created' }))
  assert.equal(await deliveryJobs(s, b.id, A.delivery), 0)
})

on('PUT', `${ACC}/:id/score-alerts`, async (r) => {
  await status(200, inB(r, { churn_risk: { thresholds: [60] } }))
  const [own] = await s.sql`select score_alerts from accounts where id = ${b.id}`
  assert.deepEqual(own.score_alerts, { churn_risk: { thresholds: [60] } })
})

on('GET', `${ACC}/:id/score-alerts`, async (r) => {
  const [own] = await s.sql`select score_alerts from accounts where id = ${b.id}`
  assert.deepEqual((await status(200, inB(r))).body, own.score_alerts ?? {})
})

on('GET', `${ACC}/:id/webhooks/:webhook_id/deliveries`, async (r) => {
  await status(404, inB(r))
  assert.ok(!(await listDeliveries(s, b, bHook)).some((d) => d.id === A.delivery))
})

on('POST', `${ACC}/:id/webhooks/:webhook_id/deliveries/:delivery_id/redeliver`, async (r) => {
  await status(404, inB(r))
  // Not through B's own webhook either.
  await status(
    404,
    s.admin('POST', `/accounts/${b.id}/webhooks/${bHook}/deliveries/${A.delivery}/redeliver`),
  )
  assert.equal(await deliveryJobs(s, a.id, A.delivery), 0)
  assert.equal(await deliveryJobs(s, b.id, A.delivery), 0)
})

on('POST', `${ACC}/:id/webhooks/:webhook_id/recover`, async (r) => {
  await status(404, inB(r, { since: '2000-01-01T00:00:00Z' }))
})

on('GET', `${ACC}/:id/notifications`, async (r) => {
  const own = await ownIds('notifications', b.id)
  assert.deepEqual(listedIds((await status(200, inB(r))).body), own)
  // The email of A's user: B's own user of that email (if any) may have some, A's never show.
  for (const n of (await status(200, inB(r, undefined, {}, '?user_email=ann@a.test'))).body)
    assert.ok(own.includes(n.id))
})

on('PATCH', `${ACC}/:id`, async (r) => {
  const renamed = (await status(200, inB(r, { name: 'B renamed' }))).body
  assert.deepEqual([renamed.id, renamed.name], [b.id, 'B renamed'])
  await status(200, inB(r, { name: 'B' }))
})

on('GET', `${ACC}/:id/uploads`, async (r) => {
  const listed = (await status(200, inB(r))).body.map((u: { upload_id: number }) => u.upload_id)
  assert.deepEqual(sorted(listed), await ownIds('uploads', b.id))
})

on('POST', `${ACC}/:id/uploads/:upload_id/retry`, async (r) => {
  await status(404, inB(r))
})

on('POST', `${ACC}/:id/uploads/:upload_id/cancel`, async (r) => {
  await status(404, inB(r))
})

on('GET', `${ACC}/:id/events`, async (r) => {
  for (const query of ['', '?customer=only-a']) {
    assert.deepEqual(
      listedIds((await status(200, inB(r, undefined, {}, query))).body.events),
      await ownIds('tracking_events', b.id),
    )
  }
})

// ---- the tests ----------------------------------------------------------------------------------

// Compared with A's rows just before, so that a leak fails only the case that made it.
// ---- privacy ------------------------------------------------------------------------------------

// B erases A's contact's external id in B (where it names nobody), then lifts the suppression.
const erasesInB = async (pending: Promise<Call>, read: (id: number) => Promise<Call>) => {
  const id = (await status(202, pending)).body.id
  const done = await eventually(async () => {
    const got = (await status(200, read(id))).body
    return got.status !== 'pending' && got
  }, "B's erasure")
  assert.equal(done.status, 'done')
  assert.deepEqual([done.counts.contacts, done.counts.customers], [0, 0])
  await status(204, bEraser('/api/v1/suppressions/contact/a-contact', undefined, 'DELETE'))
}
const A_CONTACT = { customer_external_id: 'only-a', contact_external_id: 'a-contact' }

on('POST', '/api/v1/erasures', () =>
  erasesInB(bEraser('/api/v1/erasures', { contacts: [A_CONTACT] }), (id) =>
    bEraser(`/api/v1/erasures/${id}`, undefined, 'GET'),
  ),
)

on('GET', '/api/v1/erasures/:erasure_id', async () => {
  await status(404, bEraser(`/api/v1/erasures/${A.erasure}`, undefined, 'GET'))
})

on('POST', '/admin/v1/accounts/:id/erasures', (route) =>
  erasesInB(inB(route, { contacts: [A_CONTACT] }), (id) =>
    s.admin('GET', `/accounts/${b.id}/erasures/${id}`),
  ),
)

on('GET', '/admin/v1/accounts/:id/erasures/:erasure_id', async (route) => {
  await status(404, inB(route))
})

on('GET', '/api/v1/customer/:external_id/contact/:contact_id/export', async () => {
  await status(404, get(b, '/api/v1/customer/only-a/contact/a-contact/export'))
  assert.equal(
    (await status(200, get(a, '/api/v1/customer/only-a/contact/a-contact/export'))).body.contact
      .record.name,
    'A Contact',
  )
})

on('GET', '/api/v1/customer/:external_id/export', async () => {
  await status(404, get(b, '/api/v1/customer/only-a/export'))
  const own = (await status(200, get(b, '/api/v1/customer/shared-1/export'))).body
  assert.equal(own.customer.record.name, 'B Shared')
  assert.deepEqual(own.events, [])
})

on('GET', '/api/v1/suppressions', async () => {
  const [mine] =
    await s.sql`select encode(hash, 'hex') as hash from suppressions where account_id = ${a.id}`
  const listed = (await status(200, bEraser('/api/v1/suppressions', undefined, 'GET'))).body
  assert.ok(!listed.some((x: { hash: string }) => x.hash === mine.hash))
})

on('DELETE', '/api/v1/suppressions/:entity/:external_id', async () => {
  await status(404, bEraser('/api/v1/suppressions/customer/gone-a', undefined, 'DELETE'))
})

// ---- Segment's HTTP Tracking API, the ingest status, This week, the property list ---------------

const relaySettled = (account: Account) =>
  eventually(
    async () =>
      (
        await s.sql`select ((select count(*) from segment_messages where account_id = ${account.id}
            and status = 'received') + (select count(*) from tracking_events
              where account_id = ${account.id}
            and status = 'received'))::int as n`
      )[0].n === 0,
    `Segment messages of ${account.id} applied`,
  )
// B's key, messages naming A's customer and contact: B's own records (A's messageId is no duplicate
// for B), never A's; what B created is removed again.
const SEGMENT_MESSAGES: Record<string, object> = {
  batch: {
    type: 'group',
    messageId: 'a-m1',
    groupId: 'only-a',
    userId: 'a-contact',
    traits: { name: 'B Group' },
  },
  group: { messageId: 'b-group', groupId: 'only-a', traits: { name: 'B Group' } },
  identify: { messageId: 'b-identify', userId: 'a-contact', traits: { name: 'B Person' } },
  track: {
    messageId: 'b-track',
    userId: 'a-contact',
    event: 'login',
    context: { groupId: 'only-a' },
  },
  page: { messageId: 'b-page', userId: 'a-contact', name: 'Home' },
  screen: { messageId: 'b-screen', userId: 'a-contact', name: 'Home' },
  alias: { messageId: 'b-alias', userId: 'a-contact', previousId: 'x' },
}
for (const [type, message] of Object.entries(SEGMENT_MESSAGES))
  on('POST', `/v1/${type}`, async () => {
    await status(200, relayBatch(b, [message], `/v1/${type}`))
    await relaySettled(b)
    // A track that names its customer is kept as B's tracked event (src/tracking/relay.ts).
    const [mine] =
      await s.sql`select ((select count(*) from segment_messages where account_id = ${b.id}
        and message_id = ${(message as { messageId: string }).messageId})
      + (select count(*) from tracking_events where account_id = ${b.id}
        and message_id = ${(message as { messageId: string }).messageId}))::int as n`
    assert.equal(mine.n, 1)
    const made = await get(b, '/api/v1/customer/only-a')
    if (made.status === 200) {
      assert.equal(made.body.name, 'B Group')
      await status(204, del(b, '/api/v1/customer/only-a'))
    }
  })

on('GET', '/api/v1/ingest/status', async () => {
  const mine = JSON.stringify((await status(200, get(b, '/api/v1/ingest/status'))).body)
  assert.ok(!mine.includes('contry') && !mine.includes('a-m1"'), mine)
  assert.match(JSON.stringify((await status(200, get(a, '/api/v1/ingest/status'))).body), /contry/)
})

on('GET', '/admin/v1/accounts/:id/ingest', async () => {
  const mine = JSON.stringify(
    (await status(200, asAdmin('GET', `/admin/v1/accounts/${b.id}/ingest`))).body,
  )
  assert.ok(!mine.includes('contry'), mine)
  await status(404, asAdmin('GET', '/admin/v1/accounts/999999/ingest'))
})

on('GET', '/api/v1/churn-model', async () => {
  assert.equal((await status(200, get(a, '/api/v1/churn-model'))).body.error, 'A only')
  const mine = (await status(200, get(b, '/api/v1/churn-model'))).body
  assert.equal(mine.status, 'none')
  assert.ok(!JSON.stringify(mine).includes('A only'))
})

on('POST', '/api/v1/churn-model/train', async () => {
  // B has too few labels: refused, and A's model row stays as it was.
  await status(422, b.api('/api/v1/churn-model/train', {}))
  assert.equal((await status(200, get(a, '/api/v1/churn-model'))).body.status, 'failed')
})

on('GET', `${ACC}/:id/churn-model`, async (r) => {
  const mine = (await status(200, inB(r))).body
  assert.equal(mine.status, 'none')
  assert.ok(!JSON.stringify(mine).includes('A only'))
})

on('POST', `${ACC}/:id/churn-model/train`, async (r) => {
  // The operator's training of B is refused for B's few labels; A's model row stays as it was.
  await status(422, inB(r, {}))
  assert.equal((await status(200, get(a, '/api/v1/churn-model'))).body.status, 'failed')
})

on('GET', '/api/v1/insights/week', async () => {
  const report = async (account: Account) =>
    (await status(200, get(account, '/api/v1/insights/week'))).body
  const names = (r: any) =>
    r.movements.reactivated.customers.map((c: { external_id: string }) => c.external_id)
  assert.deepEqual(names(await report(a)), ['only-a'])
  const mine = await report(b)
  assert.deepEqual(names(mine), [])
  assert.ok(!JSON.stringify(mine).includes('A Only'))
})

on('GET', '/api/v1/properties', async () => {
  // B's own a_secret is a contact attribute; A's is a customer attribute.
  const mine = (await status(200, get(b, '/api/v1/properties'))).body as {
    entity: string
    codename: string
  }[]
  assert.ok(mine.some((p) => p.codename === 'logins'))
  assert.deepEqual(
    mine.filter((p) => p.codename === 'a_secret').map((p) => p.entity),
    ['contact'],
  )
})

on('GET', '/api/v1/account', async () => {
  assert.deepEqual((await status(200, get(b, '/api/v1/account'))).body, { id: b.id, name: 'B' })
})

on('GET', '/api/v1/users', async () => {
  // B's own users only (an earlier case gave B a user of A's email: ids tell them apart).
  const mine = (await status(200, get(b, '/api/v1/users'))).body as { id: number }[]
  assert.deepEqual(listedIds(mine), await ownIds('users', b.id))
  assert.ok(mine.length > 0)
})

on('PATCH', '/admin/v1/accounts/:id/properties/:entity/:codename', async () => {
  await status(
    404,
    asAdmin('PATCH', `/admin/v1/accounts/${b.id}/properties/customer/a_secret`, { label: 'B' }),
  )
})

// The audit log: B's key with the audit scope, and the admin API with B's id, list
// B's entries only.
on('GET', '/api/v1/audit', async () => {
  const key = (await status(201, s.admin('POST', `/accounts/${b.id}/keys`, { scopes: ['audit'] })))
    .body
  const entries = (
    await status(200, s.api(key.token)('/api/v1/audit?limit=1000', undefined, 'GET'))
  ).body.entries
  assert.ok(entries.length > 0)
  assert.deepEqual(listedIds(entries), await ownIds('audit_entries', b.id))
})

on('GET', '/admin/v1/accounts/:id/audit', async (r) => {
  const entries = (await status(200, inB(r, undefined, {}, '?limit=1000'))).body.entries
  assert.deepEqual(listedIds(entries), await ownIds('audit_entries', b.id))
})

on('POST', `${ACC}/:id/users/:user_id/reset`, async (r) => {
  await status(404, inB(r))
})

on('DELETE', `${ACC}/:id/users/:user_id`, async (r) => {
  await status(404, inB(r))
})

on('POST', '/api/v1/users', async () => {
  const made = await status(201, asBAdmin('POST', '/api/v1/users', { email: 'ann-too@a.test' }))
  assert.ok((await ownIds('users', b.id)).includes(made.body.id))
})

on('POST', '/api/v1/users/:user_id/reset', async () => {
  await status(404, asBAdmin('POST', `/api/v1/users/${A.user}/reset`))
})

on('DELETE', '/api/v1/users/:user_id', async () => {
  await status(404, asBAdmin('DELETE', `/api/v1/users/${A.user}`))
})

on('PATCH', '/api/v1/users/:user_id', async () => {
  await status(404, asBAdmin('PATCH', `/api/v1/users/${A.user}`, { role: 'viewer' }))
})

on('PATCH', `${ACC}/:id/users/:user_id`, async (r) => {
  await status(404, inB(r, { role: 'viewer' }))
})

// An account admin's SSO: B has none of its own yet, so A's provider is not B's to read; B sets and
// removes its own, and A's stays as it was.
on('GET', '/api/v1/sso', async () => {
  await status(404, asBAdmin('GET', '/api/v1/sso'))
})

on('PUT', '/api/v1/sso', async () => {
  const sso = {
    issuer: 'https://idp.b.test',
    client_id: 'b',
    client_secret: 's',
    domains: ['b.test'],
  }
  const set = await status(200, asBAdmin('PUT', '/api/v1/sso', { ...sso, default_role: 'viewer' }))
  assert.equal(set.body.issuer, sso.issuer)
})

on('DELETE', '/api/v1/sso', async () => {
  await status(204, asBAdmin('DELETE', '/api/v1/sso'))
  await status(404, asBAdmin('GET', '/api/v1/sso'))
})

on('GET', '/auth/v1/me', async () => {
  assert.deepEqual((await status(200, asBAdmin('GET', '/auth/v1/me'))).body.account, {
    id: b.id,
    name: 'B',
  })
})

on('POST', '/auth/v1/sign-in', async () => {
  // A wrong password for A's user opens nothing; B's person signs in to B.
  await status(
    401,
    s.call('POST', '/auth/v1/sign-in', { email: 'ann@a.test', password: 'not the password' }),
  )
  const again = await status(
    200,
    s.call('POST', '/auth/v1/sign-in', { email: 'boss@b.test', password: PASSWORD }),
  )
  assert.equal(again.body.account.id, b.id)
})

on('POST', '/auth/v1/password', async () => {
  // B's reset secret under A's account id is no link of A's.
  const reset = await status(
    201,
    s.admin('POST', `/accounts/${b.id}/users/${(await ownIds('users', b.id))[0]}/reset`),
  )
  const secret = reset.body.reset_token.split('.')[1]
  await status(
    400,
    s.call('POST', '/auth/v1/password', {
      token: `${a.id}.${secret}`,
      password: 'takeover password',
    }),
  )
})

on('POST', '/auth/v1/sign-out', async () => {
  // Last of B's session cases: B's session ends, A's stays.
  await status(204, asBAdmin('POST', '/auth/v1/sign-out'))
  await status(401, asBAdmin('GET', '/auth/v1/me'))
})

on('GET', '/auth/v1/sso/:account_id/start', async () => {
  // B has no SSO: its start is 404, and writes no pending sign-in of A's or B's.
  await status(404, s.call('GET', `/auth/v1/sso/${b.id}/start`))
})

on('GET', '/auth/v1/sso/callback', async () => {
  // A's pending state under B's account id opens nothing, and A's pending sign-in stays.
  const state = `${b.id}.${A.ssoState}`
  const cookie = `service_sso_state=${state}`
  // The refusal sends the browser back to the console's sign-in page, naming the state.
  const res = await status(
    302,
    s.call('GET', `/auth/v1/sso/callback?state=${state}&code=x`, undefined, { cookie }),
  )
  assert.match(res.headers.get('location') ?? '', /\/console#sso_error=invalid_state/)
})

on('PUT', `${ACC}/:id/sso`, async (r) => {
  // The operator sets B's provider; A's rows stay as they were.
  const sso = {
    issuer: 'https://idp.b.test',
    client_id: 'b',
    client_secret: 's',
    domains: ['b.test'],
    default_role: 'viewer',
  }
  await status(200, inB(r, sso))
})

const leavesAUntouched = async (run: () => Promise<void>) => {
  const before = await tenantRows(a.id)
  await run()
  assert.deepEqual(await tenantRows(a.id), before, "A's rows changed")
}

for (const [name, run] of cases) {
  const [method, path] = name.split(' ') as [Route['method'], string]
  test(`${name}: B cannot reach A's data`, () => leavesAUntouched(() => run({ method, path })))
}

test('without the admin token every admin route is 401', () =>
  leavesAUntouched(async () => {
    for (const route of routes.filter((r) => r.auth === 'admin')) {
      for (const headers of [
        {},
        { authorization: 'Bearer wrong' },
        { authorization: ADMIN_TOKEN },
      ] as Record<string, string>[]) {
        const res = await asAdmin(
          route.method,
          fill(route.path, { ...aParams(), id: a.id }),
          undefined,
          headers,
        )
        assert.equal(
          res.status,
          401,
          `${route.method} ${route.path} with ${JSON.stringify(headers)}`,
        )
      }
    }
  }))

test('every route of the table has an isolation case', () => {
  const table = routes
    .map((r) => `${r.method} ${r.path}`)
    .filter((r) => !NO_TENANT_DATA.includes(r))
  assert.deepEqual([...cases.keys()].sort(), table.sort())
  for (const r of NO_TENANT_DATA)
    assert.ok(
      routes.some((route) => `${route.method} ${route.path}` === r),
      `${r} is no longer a route`,
    )
})
