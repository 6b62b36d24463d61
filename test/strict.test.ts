// Strict bodies: every JSON body refuses keys the API does not define, with a 400 naming the full
// path and, where one is close, the key meant. The maps of custom values (attributes, metrics)
// and tracking data stay open. Requests in the interface's shape are answered as before.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { scoredAccount, uploadAndWait, waitForUpload } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let a: Awaited<ReturnType<typeof scoredAccount>>
before(async () => {
  s = await startTestService()
  a = await scoredAccount(s)
  await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
  await uploadAndWait(
    a.api,
    'customers',
    [
      {
        external_id: 'acme',
        name: 'Acme',
        attributes: { country: 'US' },
        metrics: [{ date: '2026-11-01', logins: 30 }],
      },
    ],
    { scored: true },
  )
})
after(() => s.stop())

// [what, method, path, body with one unknown key, its pointer, the key meant (or null)]
const typos = (): [string, string, string, unknown, string, string | null][] => [
  ['customer search', 'POST', '/api/v1/customers/search', { filter: [] }, '/filter', 'filters'],
  [
    'a search filter',
    'POST',
    '/api/v1/customers/search',
    {
      filters: [
        { propertyName: 'name', operator: 'KNOWN' },
        { propertyName: 'name', opertor: 'EQ', value: 'x' },
      ],
    },
    '/filters/1/opertor',
    'operator',
  ],
  ['contact search', 'POST', '/api/v1/contacts/search', { limt: 5 }, '/limt', 'limit'],
  [
    'a customer upload item',
    'POST',
    '/api/v1/customers',
    { customers: [{ external_id: 'b', name: 'B', nmae: 'B' }] },
    '/customers/0/nmae',
    'name',
  ],
  [
    'a customer upload body',
    'POST',
    '/api/v1/customers',
    { customers: [{ external_id: 'b', name: 'B' }], dry_run: true },
    '/dry_run',
    null,
  ],
  [
    'a contact upload item',
    'POST',
    '/api/v1/contacts',
    {
      contacts: [
        {
          customer_external_id: 'acme',
          contact_external_id: 'p',
          contact_name: 'P',
          contact_email: 'x',
        },
      ],
    },
    '/contacts/0/contact_email',
    null,
  ],
  [
    'a single customer create',
    'POST',
    '/api/v1/customer',
    { external_id: 'c', name: 'C', owner: 'x' },
    '/owner',
    null,
  ],
  [
    'a single customer update',
    'PUT',
    '/api/v1/customer/acme',
    { is_chruned: true },
    '/is_chruned',
    'is_churned',
  ],
  [
    'a single contact create',
    'POST',
    '/api/v1/customer/acme/contact',
    { contact_external_id: 'p', contact_name: 'P', customer_external_id: 'acme' },
    '/customer_external_id',
    null,
  ],
  [
    'a single contact update',
    'PUT',
    '/api/v1/customer/acme/contact/p',
    { name: 'P' },
    '/name',
    null,
  ],
  [
    'a tracking body',
    'POST',
    '/api/tracker/track',
    { trackerkey: 'CS-X', events: [] },
    '/trackerkey',
    'trackerKey',
  ],
  [
    'a tracking event',
    'POST',
    '/api/tracker/track',
    {
      trackerKey: 'CS-X',
      events: [{ name: 'e', timestamp: Date.now(), identification: { customer: 'acme' }, time: 1 }],
    },
    '/events/0/time',
    null,
  ],
]

const adminTypos = (id: number): [string, string, string, unknown, string, string | null][] => [
  ['an account', 'POST', '/accounts', { name: 'X', source: 'API' }, '/source', null],
  ['a key', 'POST', `/accounts/${id}/keys`, { name: 'k', scope: ['search'] }, '/scope', 'scopes'],
  ['a user', 'POST', `/accounts/${id}/users`, { email: 'u@x.test', nmae: 'U' }, '/nmae', 'name'],
  [
    'a property',
    'POST',
    `/accounts/${id}/properties`,
    { entity: 'customer', kind: 'attribute', codename: 'x', type: 'string', tpye: 'x' },
    '/tpye',
    'type',
  ],
  ['a tag', 'POST', `/accounts/${id}/tags`, { title: 'T', colour: '#ffffff' }, '/colour', 'color'],
  [
    'record tags',
    'PUT',
    `/accounts/${id}/customers/acme/tags`,
    { title: ['T'] },
    '/title',
    'titles',
  ],
  [
    'tracking domains',
    'PUT',
    `/accounts/${id}/tracking`,
    { domain: ['a.test'] },
    '/domain',
    'domains',
  ],
  [
    'a webhook subscription',
    'POST',
    `/accounts/${id}/webhooks`,
    { url: 'http://127.0.0.1:9/', events: ['customer.created'], secret: 'x' },
    '/secret',
    null,
  ],
  [
    'the scoring model',
    'PUT',
    `/accounts/${id}/scoring`,
    { customer: { engagment: [] } },
    '/customer/engagment',
    null,
  ],
]

const assertRefused = (
  res: { status: number; body: any },
  pointer: string,
  meant: string | null,
) => {
  assert.equal(res.status, 400, JSON.stringify(res.body))
  const error = res.body.errors.find((e: { path: string }) => e.path === pointer)
  assert.ok(error, `no error at ${pointer}: ${JSON.stringify(res.body.errors)}`)
  if (meant) assert.match(error.message, new RegExp(`did you mean ${meant}\\?`))
}

describe('unknown keys are refused with their path', () => {
  test('on every API endpoint group', async () => {
    for (const [what, method, path, body, pointer, meant] of typos()) {
      const res = await a.api(path, body, method)
      assert.equal(res.status, 400, what)
      assertRefused(res, pointer, meant)
      if (pointer === '/filters/1/opertor')
        assert.match(
          res.body.errors[1]?.message ?? res.body.errors[0].message,
          /filters\[1\]\.opertor/,
        )
    }
  })

  test('on every admin body', async () => {
    for (const [what, method, path, body, pointer, meant] of adminTypos(a.id)) {
      const res = await s.admin(method, path, body)
      assert.equal(res.status, 400, what)
      if (pointer.startsWith('/customer/'))
        assert.ok(
          res.body.errors.some((e: { path: string }) => e.path === pointer),
          what,
        )
      else assertRefused(res, pointer, meant)
    }
  })

  test('nothing was written by a refused body', async () => {
    const [{ uploads }] =
      await s.sql`select count(*)::int as uploads from uploads where account_id = ${a.id}`
    assert.equal(uploads, 1)
    assert.equal((await a.api('/api/v1/customer/c', undefined, 'GET')).status, 404)
  })
})

test('attributes, metrics and tracking data stay open maps: unknown codenames are dropped and counted', async () => {
  const up = await a.api('/api/v1/customers', {
    customers: [
      {
        external_id: 'd',
        name: 'D',
        attributes: { country: 'DE', nope: 1 },
        metrics: [{ date: '2026-11-02', logins: 1, zap: 2 }],
      },
    ],
  })
  assert.equal(up.status, 200)
  assert.equal((await waitForUpload(a.api, up.body.upload_id)).dropped_keys, 2)
  const tracked = await a.api('/api/tracker/track', {
    trackerKey: a.trackerKey,
    events: [
      {
        name: 'e',
        timestamp: Date.now(),
        identification: { customer: 'd' },
        data: { customer: { anything: 1 } },
      },
    ],
  })
  assert.equal(tracked.status, 200)
})

test('arrays are not objects: a search body or tracking data given as [] is a 400', async () => {
  assert.equal((await a.api('/api/v1/customers/search', [])).status, 400)
  const res = await a.api('/api/tracker/track', {
    trackerKey: a.trackerKey,
    events: [{ name: 'e', timestamp: Date.now(), identification: { customer: 'd' }, data: [] }],
  })
  assert.equal(res.status, 400)
  assert.equal(res.body.errors[0].path, '/events/0/data')
})

describe('upsell_score', () => {
  test('appears in GET customer and customer search, and filters customer search', async () => {
    const one = await a.api('/api/v1/customer/acme', undefined, 'GET')
    assert.equal(typeof one.body.upsell_score, 'number')
    const page = await a.api('/api/v1/customers/search', {
      filters: [{ propertyName: 'upsell_score', operator: 'GTE', value: '0' }],
    })
    assert.equal(page.status, 200)
    const found = page.body.results.find((r: { id: string }) => r.id === 'acme')
    assert.equal(found.upsell_score, one.body.upsell_score)
    const above = await a.api('/api/v1/customers/search', {
      filters: [
        { propertyName: 'upsell_score', operator: 'GT', value: String(one.body.upsell_score) },
      ],
    })
    assert.equal(above.status, 200)
    assert.ok(!above.body.results.some((r: { id: string }) => r.id === 'acme'))
    for (const r of above.body.results) assert.ok(r.upsell_score > one.body.upsell_score)
  })

  test('contact search refuses it as a customer-only field', async () => {
    const res = await a.api('/api/v1/contacts/search', {
      filters: [{ propertyName: 'upsell_score', operator: 'GT', value: '1' }],
    })
    assert.equal(res.status, 400)
    assert.equal(res.body.errors[0].path, '/filters/0/propertyName')
  })
})
