import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'

let s: TestService
before(async () => {
  s = await startTestService()
})
after(() => s.stop())

const paths = (res: { body: any }) => res.body.errors.map((e: { path: string }) => e.path)

test('the admin API is closed without its token, and disabled when none is configured', async () => {
  assert.equal((await s.call('POST', '/admin/v1/accounts', { name: 'x' })).status, 401)
  const wrong = await s.call('GET', '/admin/v1/accounts/1', undefined, {
    authorization: 'Bearer nope',
  })
  assert.equal(wrong.status, 401)
  assert.equal(wrong.headers.get('www-authenticate'), 'Bearer')
  const off = await startTestService({ adminToken: undefined }, { http: true, worker: false })
  try {
    const res = await off.call(
      'POST',
      '/admin/v1/accounts',
      { name: 'x' },
      { authorization: 'Bearer undefined' },
    )
    assert.equal(res.status, 401)
    assert.match(res.body.detail, /disabled/)
  } finally {
    await off.stop()
  }
})

test('accounts: create, read, defaults, bad input, 404', async () => {
  const res = await s.admin('POST', '/accounts', { name: 'Acme' })
  assert.equal(res.status, 201)
  assert.equal(res.body.name, 'Acme')
  assert.equal(res.body.source_of_truth, 'API')
  assert.match(res.body.tracker_key, /^CS-[A-Z0-9]{5,}$/)
  assert.deepEqual(res.body.tracking_domains, [])
  assert.match(res.body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  assert.deepEqual((await s.admin('GET', `/accounts/${res.body.id}`)).body, res.body)
  assert.equal(
    (await s.admin('POST', '/accounts', { name: 'F', source_of_truth: 'HUBSPOT' })).body
      .source_of_truth,
    'HUBSPOT',
  )
  assert.deepEqual(paths(await s.admin('POST', '/accounts', {})), ['/name'])
  assert.deepEqual(
    paths(await s.admin('POST', '/accounts', { name: 'x', source_of_truth: 'api' })),
    ['/source_of_truth'],
  )
  assert.equal((await s.admin('GET', '/accounts/999999')).status, 404)
  assert.equal((await s.admin('GET', '/accounts/abc')).status, 404)
  assert.equal((await s.admin('GET', '/accounts/999999/keys')).status, 404)
})

test('keys: token shown once, stored hashed, scopes validated, revocation', async () => {
  const { id } = await s.account()
  const key = await s.admin('POST', `/accounts/${id}/keys`, { name: 'ci', scopes: ['search'] })
  assert.equal(key.status, 201)
  assert.match(key.body.token, new RegExp(`^sk_${id}_[A-Za-z0-9_-]{43}$`))
  assert.deepEqual(key.body.scopes, ['search'])
  const listed = (await s.admin('GET', `/accounts/${id}/keys`)).body
  assert.ok(listed.every((k: any) => !('token' in k) && !('token_hash' in k)))
  const [row] = await s.sql`select token_hash from api_keys where id = ${key.body.id}`
  assert.equal(row.token_hash.length, 32)
  assert.ok(!JSON.stringify(await s.sql`select * from api_keys`).includes(key.body.token))
  assert.deepEqual(paths(await s.admin('POST', `/accounts/${id}/keys`, { scopes: ['admin'] })), [
    '/scopes/0',
  ])
  assert.deepEqual(paths(await s.admin('POST', `/accounts/${id}/keys`, { scopes: [] })), [
    '/scopes',
  ])
  assert.equal((await s.admin('DELETE', `/accounts/${id}/keys/${key.body.id}`)).status, 204)
  assert.equal((await s.admin('DELETE', `/accounts/${id}/keys/999999`)).status, 404)
  // Another account's key cannot be revoked through this account.
  const other = await s.account('Other')
  const otherKey = (await s.admin('GET', `/accounts/${other.id}/keys`)).body[0]
  assert.equal((await s.admin('DELETE', `/accounts/${id}/keys/${otherKey.id}`)).status, 404)
})

test('users: add, list, duplicate email (case-insensitive) 409, bad email 400', async () => {
  const { id } = await s.account()
  const u = await s.admin('POST', `/accounts/${id}/users`, {
    email: 'Ann@Example.com',
    name: 'Ann',
  })
  assert.equal(u.status, 201)
  assert.deepEqual(Object.keys(u.body).sort(), [
    'email',
    'id',
    'invite_token',
    'invite_url',
    'name',
    'role',
  ])
  assert.equal(
    (await s.admin('POST', `/accounts/${id}/users`, { email: 'ann@example.com' })).status,
    409,
  )
  assert.deepEqual(paths(await s.admin('POST', `/accounts/${id}/users`, { email: 'nope' })), [
    '/email',
  ])
  const { invite_token, invite_url, ...user } = u.body
  assert.deepEqual((await s.admin('GET', `/accounts/${id}/users`)).body, [user])
})

test('properties: system attributes exist, definitions validated, duplicates 409', async () => {
  const { id } = await s.account()
  const list = (await s.admin('GET', `/accounts/${id}/properties`)).body
  assert.deepEqual(list.map((p: any) => [p.codename, p.type, p.system]).sort(), [
    ['contact_email', 'string', true],
    ['crm_link', 'string', true],
    ['renewal_date', 'date', true],
  ])
  const def = { entity: 'customer', kind: 'metric', codename: 'logins', type: 'number' }
  assert.equal((await s.admin('POST', `/accounts/${id}/properties`, def)).status, 201)
  assert.equal((await s.admin('POST', `/accounts/${id}/properties`, def)).status, 409)
  assert.equal(
    (await s.admin('POST', `/accounts/${id}/properties`, { ...def, codename: 'Logins' })).status,
    201,
    'codenames are case-sensitive',
  )
  assert.equal(
    (await s.admin('POST', `/accounts/${id}/properties`, { ...def, entity: 'contact' })).status,
    201,
  )
  assert.equal(
    (
      await s.admin('POST', `/accounts/${id}/properties`, {
        ...def,
        codename: 'crm_link',
        kind: 'attribute',
      })
    ).status,
    409,
  )
  assert.deepEqual(
    paths(await s.admin('POST', `/accounts/${id}/properties`, { ...def, codename: 'date' })),
    ['/codename'],
  )
  assert.deepEqual(
    paths(await s.admin('POST', `/accounts/${id}/properties`, { ...def, codename: '1x' })),
    ['/codename'],
  )
  assert.deepEqual(
    paths(
      await s.admin('POST', `/accounts/${id}/properties`, {
        entity: 'deal',
        kind: 'x',
        codename: 'a',
        type: 'money',
      }),
    ).sort(),
    ['/entity', '/kind', '/type'],
  )
})

test('tags: create, list, duplicate title (case-insensitive) 409, bad colour 400', async () => {
  const { id } = await s.account()
  const t = await s.admin('POST', `/accounts/${id}/tags`, { title: 'VIP', color: '#ff0000' })
  assert.equal(t.status, 201)
  assert.deepEqual(t.body, { id: t.body.id, title: 'VIP', color: '#ff0000' })
  assert.equal((await s.admin('POST', `/accounts/${id}/tags`, { title: 'vip' })).status, 409)
  assert.deepEqual(
    paths(await s.admin('POST', `/accounts/${id}/tags`, { title: 'x', color: 'red' })),
    ['/color'],
  )
  assert.deepEqual(paths(await s.admin('POST', `/accounts/${id}/tags`, { title: '' })), ['/title'])
  assert.deepEqual((await s.admin('GET', `/accounts/${id}/tags`)).body, [t.body])
})

test('scoring model: validated in shape and against the properties, stored, read back', async () => {
  const { id } = await s.account()
  assert.equal((await s.admin('GET', `/accounts/${id}/scoring`)).status, 404)
  for (const p of [
    { entity: 'customer', kind: 'metric', codename: 'logins', type: 'number' },
    { entity: 'customer', kind: 'attribute', codename: 'country', type: 'string' },
    { entity: 'customer', kind: 'attribute', codename: 'has_sso', type: 'boolean' },
  ])
    await s.admin('POST', `/accounts/${id}/properties`, p)
  const model = {
    customer: {
      engagement: [
        { codename: 'logins', weight: 50, bad: 0, good: 40 },
        { codename: 'renewal_date', weight: 25, bad: 0, good: 180 },
      ],
      fit: [
        { codename: 'country', weight: 50, values: { US: 100, DE: 50 }, default: -100 },
        { codename: 'has_sso', weight: 50, good: true },
      ],
    },
    churn: { inactive_days: 90 },
  }
  const put = await s.admin('PUT', `/accounts/${id}/scoring`, model)
  assert.equal(put.status, 200)
  assert.deepEqual((await s.admin('GET', `/accounts/${id}/scoring`)).body, model)
  const unknown = await s.admin('PUT', `/accounts/${id}/scoring`, {
    customer: { engagement: [{ codename: 'nope', weight: 1, bad: 0, good: 1 }] },
  })
  assert.equal(unknown.status, 400)
  assert.deepEqual(paths(unknown), ['/customer/engagement/0/codename'])
  const misfit = await s.admin('PUT', `/accounts/${id}/scoring`, {
    customer: { fit: [{ codename: 'country', weight: 1, bad: 0, good: 1 }] },
  })
  assert.equal(misfit.status, 400)
  const shape = await s.admin('PUT', `/accounts/${id}/scoring`, {
    customer: { engagement: [{ codename: 'logins', weight: -1, bad: 0, good: 1 }] },
  })
  assert.equal(shape.status, 400)
  assert.ok(paths(shape).some((p: string) => p.startsWith('/customer/engagement/0')))
})

test('scoring preview: what the scoring job then stores, for customers of every shape; nothing written', async () => {
  const a = await scoredAccount(s, 'Preview')
  const DAY = 86_400_000
  const day = (n: number) => new Date(Date.now() - n * DAY).toISOString().slice(0, 10)
  const customers = [
    {
      external_id: 'p1',
      name: 'P1',
      attributes: { country: 'US', has_sso: true, plan_started: day(400) },
    },
    {
      external_id: 'p2',
      name: 'P2',
      attributes: { country: 'NZ' },
      metrics: [{ date: day(3), logins: 9, seats: 4 }],
    },
    {
      external_id: 'p3',
      name: 'P3',
      attributes: { has_sso: false, plan_started: day(20) },
      metrics: [
        { date: day(200), logins: 30, seats: 10 },
        { date: day(100), logins: 5 },
        { date: day(40), logins: 22, seats: 1 },
      ],
    },
    { external_id: 'p4', name: 'P4', metrics: [{ date: day(500), logins: 1 }] },
  ]
  await uploadAndWait(a.api, 'customers', customers, { scored: true })
  const model = {
    customer: {
      engagement: [
        { codename: 'logins', weight: 3, bad: 2, good: 25 },
        { codename: 'seats', weight: 1, bad: 1, good: 8 },
        { codename: 'has_sso', weight: 0.5, good: false },
      ],
      fit: [
        { codename: 'country', weight: 2, values: { US: 70, NZ: -30 }, default: 10 },
        { codename: 'plan_started', weight: 1, bad: 0, good: 365 },
        { codename: 'seats', weight: 1, bad: 0, good: 12 },
      ],
    },
  }
  const read = async (id: string) => (await a.api(`/api/v1/customer/${id}`, undefined, 'GET')).body
  const SCORES = [
    'engagementscore',
    'engagementscore_difference',
    'fitscore',
    'churn_risk',
    'upsell_score',
    'last_seen',
  ]
  const pick = (c: Record<string, unknown>) => Object.fromEntries(SCORES.map((k) => [k, c[k]]))
  const previews = new Map<string, Record<string, unknown>>()
  for (const { external_id } of customers) {
    const before = await read(external_id)
    const res = await s.admin('POST', `/accounts/${a.id}/scoring/preview`, { model, external_id })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    assert.deepEqual(res.body.current, pick(before))
    assert.deepEqual(await read(external_id), before, 'a preview writes nothing')
    previews.set(external_id, res.body.preview)
  }
  assert.equal((await s.admin('PUT', `/accounts/${a.id}/scoring`, model)).status, 200)
  await eventually(
    async () =>
      (
        await s.sql`
          select count(*)::int as n from graphile_worker._private_jobs
            where payload->>'account_id' = ${String(a.id)}`
      )[0].n === 0,
    'rescored',
    60_000,
  )
  for (const { external_id } of customers)
    assert.deepEqual(pick(await read(external_id)), previews.get(external_id))

  const preview = (body: unknown) => s.admin('POST', `/accounts/${a.id}/scoring/preview`, body)
  const misfit = await preview({
    model: { customer: { fit: [{ codename: 'nope', weight: 1, good: true }] } },
    external_id: 'p1',
  })
  assert.equal(misfit.status, 400)
  assert.deepEqual(paths(misfit), ['/model/customer/fit/0/codename'])
  const shape = await preview({
    model: { customer: { fit: [{ codename: 'seats', weight: 0, bad: 0, good: 1 }] } },
    external_id: 'p1',
  })
  assert.equal(shape.status, 400)
  assert.ok(
    paths(shape).some((p: string) => p.startsWith('/model/customer/fit/0')),
    JSON.stringify(shape.body),
  )
  const extra = await preview({ model, external_id: 'p1', save: true })
  assert.equal(extra.status, 400)
  assert.deepEqual(paths(extra), ['/save'])
  assert.deepEqual(paths(await preview({ model })), ['/external_id'])
  assert.equal((await preview({ model, external_id: 'nobody' })).status, 404)
  assert.equal(
    (await s.admin('POST', '/accounts/999999/scoring/preview', { model, external_id: 'p1' }))
      .status,
    404,
  )
})

test('tracking domains: set, normalised, validated', async () => {
  const { id } = await s.account()
  const res = await s.admin('PUT', `/accounts/${id}/tracking`, {
    domains: ['Example.com', 'app.example.com'],
  })
  assert.equal(res.status, 200)
  assert.deepEqual(res.body.tracking_domains, ['example.com', 'app.example.com'])
  assert.deepEqual(
    paths(await s.admin('PUT', `/accounts/${id}/tracking`, { domains: ['not a domain'] })),
    ['/domains/0'],
  )
})

test('webhooks: secret once, list without it, URL rules, remove, rotate', async () => {
  const { id } = await s.account()
  const hook = await s.admin('POST', `/accounts/${id}/webhooks`, {
    url: 'http://127.0.0.1:9/hook',
    events: ['customer.created'],
    name: 'crm',
  })
  assert.equal(hook.status, 201)
  assert.match(hook.body.secret, /^whsec_/)
  assert.equal(hook.body.active, true)
  const list = (await s.admin('GET', `/accounts/${id}/webhooks`)).body
  assert.equal(list.length, 1)
  assert.ok(!('secret' in list[0]))
  assert.deepEqual(
    paths(
      await s.admin('POST', `/accounts/${id}/webhooks`, { url: 'x', events: ['customer.deleted'] }),
    ).sort(),
    ['/events/0', '/url'],
  )
  const rotated = await s.admin('POST', `/accounts/${id}/webhooks/${hook.body.id}/rotate-secret`)
  assert.equal(rotated.status, 200)
  assert.notEqual(rotated.body.secret, hook.body.secret)
  assert.equal((await s.admin('DELETE', `/accounts/${id}/webhooks/${hook.body.id}`)).status, 204)
  assert.equal((await s.admin('DELETE', `/accounts/${id}/webhooks/${hook.body.id}`)).status, 404)
})

test('webhook URLs must be public https when private targets are not allowed', async () => {
  const strict = await startTestService(
    { webhookAllowPrivate: false },
    { http: true, worker: false },
  )
  try {
    const { id } = await strict.account()
    for (const url of [
      'http://example.com/x',
      'https://127.0.0.1/x',
      'https://10.0.0.5/x',
      'https://169.254.169.254/x',
      'https://localhost/x',
    ]) {
      const res = await strict.admin('POST', `/accounts/${id}/webhooks`, {
        url,
        events: ['customer.created'],
      })
      assert.equal(res.status, 400, url)
      assert.deepEqual(paths(res), ['/url'])
    }
    assert.equal(
      (
        await strict.admin('POST', `/accounts/${id}/webhooks`, {
          url: 'https://hooks.example.com/x',
          events: ['customer.created'],
        })
      ).status,
      201,
    )
  } finally {
    await strict.stop()
  }
})
