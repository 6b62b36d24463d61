// The published contract against the live service: every operation of /openapi.json is called by
// its operationId, and each answer must have a status the document lists for it and a body that
// its schema accepts, with every object closed (a field the document does not name fails too).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import type { ValidateFunction } from 'ajv'
import { ADMIN_TOKEN, startTestService, type TestService, type Call } from './helpers/service.ts'
import { scoredAccount, waitForUpload } from './helpers/fixtures.ts'
import { eventually, startReceiver, type Receiver } from './helpers/receiver.ts'
import { settled } from './helpers/webhooks.ts'
import { standalone, validator } from './helpers/openapi.ts'

let s: TestService
let r: Receiver
let doc: any
// startBackup's worker writes there.
const backups = mkdtempSync(join(tmpdir(), 'service-contract-backups-'))
before(async () => {
  s = await startTestService({ webhookRetryScale: 0.01, backupDir: backups })
  r = await startReceiver()
  doc = (await s.call('GET', '/openapi.json')).body
})
after(async () => {
  await r?.close()
  await s?.stop()
  rmSync(backups, { recursive: true, force: true })
})

// Objects the document describes without additionalProperties are closed for this check.
const closed = (schema: any): any => {
  if (Array.isArray(schema)) return schema.map(closed)
  if (typeof schema !== 'object' || schema === null) return schema
  const copy = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, closed(v)]))
  if (copy.properties && !('additionalProperties' in schema)) copy.additionalProperties = false
  return copy
}

const operations = () => {
  const ops = new Map<string, { method: string; path: string; op: any }>()
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(item))
      ops.set(op.operationId, { method: method.toUpperCase(), path, op })
  }
  return ops
}

test('every operation answers as its published schema says', async () => {
  const ops = operations()
  const ajv = validator({ formats: true })
  const compiled = new Map<object, ValidateFunction>()
  const validate = (schema: object, body: unknown) => {
    if (!compiled.has(schema)) compiled.set(schema, ajv.compile(closed(standalone(doc, schema))))
    const fn = compiled.get(schema)!
    return fn(body) ? null : fn.errors
  }
  const answered = new Map<string, Set<number>>()
  // The cookie and CSRF headers of the person signed in below, for the operations only
  // a session reaches.
  let session: Record<string, string> = {}
  const a = await scoredAccount(s)

  // Calls the operation as a client generated from the document would: path and query filled in,
  // the credentials its security names.
  const call = async (
    operationId: string,
    params: Record<string, string | number> = {},
    body?: unknown,
    query = '',
    token = a.token,
  ): Promise<Call> => {
    const found = ops.get(operationId)
    assert.ok(found, `no operation ${operationId}`)
    const { method, path, op } = found
    const url =
      path.replace(/\{(\w+)\}/g, (_, name) =>
        encodeURIComponent(String(params[name] ?? params.id ?? '')),
      ) + query
    const security = op.security[0] ? Object.keys(op.security[0])[0] : undefined
    const headers: Record<string, string> =
      security === 'adminToken'
        ? { authorization: `Bearer ${ADMIN_TOKEN}` }
        : security === 'serviceKey'
          ? { 'service-key': token }
          : security === 'segmentWriteKey'
            ? { authorization: `Basic ${Buffer.from(`${token}:`).toString('base64')}` }
            : security === 'sessionCookie'
              ? session
              : {}
    const res = await s.call(method, url, body, headers)
    const label = `${operationId} ${method} ${url} -> ${res.status}`
    const response = op.responses[String(res.status)]
    assert.ok(response, `${label}: status not in the document (${JSON.stringify(res.body)})`)
    const type = res.headers.get('content-type') ?? ''
    if (response.$ref) {
      assert.match(type, /^application\/problem\+json/, label)
      const problem =
        doc.components.responses[response.$ref.split('/').pop()].content['application/problem+json']
      assert.equal(
        validate(problem.schema, res.body),
        null,
        `${label}: ${JSON.stringify(res.body)}`,
      )
    } else if (response.content?.['application/json']) {
      assert.match(type, /^application\/json/, label)
      const errors = validate(response.content['application/json'].schema, res.body)
      assert.equal(errors, null, `${label}: ${JSON.stringify(errors)}\n${JSON.stringify(res.body)}`)
    } else if (response.content) {
      const media = Object.keys(response.content)[0]
      assert.equal(type.split(';')[0], media.split(';')[0], label)
    } else {
      assert.equal(res.body, undefined, label)
    }
    const statuses = answered.get(operationId) ?? new Set()
    answered.set(operationId, statuses.add(res.status))
    return res
  }

  const id = a.id
  await call('checkLiveness')
  await call('checkReadiness')
  await call('getMetrics')
  await call('getOpenapi')
  await call('getDocs')
  await call('getDocsScript')
  await call('getConsole')
  await call('getConsoleScript')
  await call('getConsoleStyle')
  await call('getAccount', { id })
  await call('listAccounts')
  await call('updateAccount', { id }, { name: 'Acme Two' })
  await call('setTracking', { id }, { domains: ['acme.test'] })
  const account = await call('createAccount', {}, { name: 'Other' })
  assert.equal(account.status, 201)
  const key = await call('createKey', { id }, { scopes: ['search'], name: 'reader' })
  await call('listKeys', { id })
  await call('revokeKey', { id, key_id: key.body.id })
  await call('addUser', { id }, { email: 'second@acme.test', name: 'Second' })
  await call('addUser', { id }, { email: 'second@acme.test' })
  await call('listUsers', { id })
  await call(
    'defineProperty',
    { id },
    { entity: 'customer', kind: 'attribute', codename: 'tier', type: 'string' },
  )
  await call('listProperties', { id })
  await call('relabelProperty', { id, entity: 'customer', codename: 'tier' }, { label: 'Tier' })
  await call(
    'relabelProperty',
    { id, entity: 'customer', codename: 'nothing' },
    { label: 'Nothing' },
  )
  await call('accountProperties')
  await call('createTag', { id }, { title: 'VIP', color: '#ff0000' })
  await call('listTags', { id })
  await call('getScoring', { id })
  await call('setScoring', { id }, (await call('getScoring', { id })).body)
  const hook = await call('addWebhook', { id }, { url: r.url, events: ['customer.created'] })
  await call('listWebhooks', { id })
  await call('rotateSecret', { id, webhook_id: hook.body.id })
  await call('disableWebhook', { id, webhook_id: hook.body.id })
  // A disabled webhook is not test-sent: a 409 the operation lists.
  const held = await call(
    'testWebhook',
    { id, webhook_id: hook.body.id },
    { event: 'customer.created' },
  )
  assert.equal(held.status, 409)
  await call('enableWebhook', { id, webhook_id: hook.body.id })
  await call('listEventTypes')
  await call(
    'setScoreAlerts',
    { id },
    { churn_risk: { thresholds: [70] }, engagementscore: { delta: 10 } },
  )
  await call('setScoreAlerts', { id }, { churn_risk: { thresholds: [170] } })
  await call('getScoreAlerts', { id })
  await call('updateWebhook', { id, webhook_id: hook.body.id }, { name: 'main', rate_limit: null })

  const upload = await call(
    'uploadCustomers',
    {},
    {
      customers: [
        {
          external_id: 'c1',
          name: 'One',
          owner_email: 'owner@acme.test',
          attributes: { country: 'US', has_sso: true, tier: 'gold', unknown_key: 1 },
          metrics: [
            { date: '2026-10-01', logins: 10 },
            { date: '2026-11-01', logins: 30, seats: 4 },
          ],
        },
        { external_id: 'c2', name: 'Two' },
      ],
    },
  )
  await waitForUpload(a.api, upload.body.upload_id, 30_000, true)
  await call('getUpload', { upload_id: upload.body.upload_id })
  await call('listOwnUploads', {}, undefined, '?status=processed')
  await call('listOwnUploads', {}, undefined, '?status=lost')
  const contacts = await call(
    'uploadContacts',
    {},
    {
      contacts: [
        {
          contact_external_id: 'p1',
          contact_name: 'Pat',
          customer_external_id: 'c1',
          attributes: { role: 'admin' },
          metrics: [{ date: '2026-11-01', sessions: 3 }],
        },
      ],
    },
  )
  await waitForUpload(a.api, contacts.body.upload_id, 30_000, true)
  const page = await call('searchCustomers', {}, { limit: 1, properties: ['country', 'logins'] })
  assert.ok(page.body.paging?.next?.after, 'the first page of two has a next page')
  await call(
    'searchCustomers',
    {},
    { filters: [{ propertyName: 'upsell_score', operator: 'KNOWN' }] },
  )
  const counted = await call(
    'searchCustomers',
    {},
    {
      where: {
        or: [
          { propertyName: 'name', operator: 'EQ', value: 'One' },
          { not: { propertyName: 'logins', operator: 'KNOWN' } },
        ],
      },
      count: 'exact',
    },
  )
  assert.equal(counted.body.total, 2)
  assert.equal(
    (await call('searchCustomers', {}, { count: 'estimate' })).body.total_is_estimate,
    true,
  )
  const aggregated = await call(
    'aggregateCustomers',
    {},
    {
      where: { propertyName: 'logins', operator: 'KNOWN' },
      fields: ['logins', 'upsell_score'],
      buckets: 3,
      matrix: 'grid',
    },
  )
  assert.equal(
    aggregated.body.fields[0].histogram.length,
    aggregated.body.fields[0].count > 1 ? 3 : 1,
  )
  await call('aggregateCustomers', {}, { matrix: 'points', points: 1 })
  await call('aggregateCustomers', {}, {})
  const sort = [{ propertyName: 'logins', direction: 'desc' }, { propertyName: 'createdAt' }]
  const sorted = await call('searchCustomers', {}, { sort, limit: 1 })
  assert.equal(
    typeof sorted.body.paging?.next?.after,
    'string',
    'a sorted page of two has a cursor',
  )
  const next = await call(
    'searchCustomers',
    {},
    { sort, limit: 1, after: sorted.body.paging.next.after },
  )
  assert.notEqual(next.body.results[0].id, sorted.body.results[0].id)
  await call(
    'searchContacts',
    {},
    { filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'c1' }] },
  )
  await call(
    'searchContacts',
    {},
    { filters: [{ propertyName: 'upsell_score', operator: 'KNOWN' }] },
  )
  const now = Date.now()
  await call(
    'track',
    {},
    {
      trackerKey: a.trackerKey,
      events: [
        {
          name: 'login',
          timestamp: now,
          identification: { customer: 'c1', contact: 'p1' },
          data: null,
        },
        {
          name: 'export',
          timestamp: now,
          identification: { customer: 'nobody' },
          data: { customer: { tier: 'x' } },
        },
        {
          name: 'visit',
          timestamp: now,
          identification: { customer: 'c1', contact: 'p-new' },
          data: null,
        },
      ],
    },
  )
  // Tracking makes the contact it names, without a name: its answer still matches Contact.
  const nameless = await eventually(async () => {
    const found = await a.api('/api/v1/customer/c1/contact/p-new', undefined, 'GET')
    return found.status === 200 && found
  }, 'the tracked contact')
  assert.equal(nameless.body.name, null)
  await call('getContact', { external_id: 'c1', contact_id: 'p-new' })
  await call('listEvents', { id }, undefined, '?customer=c1&limit=10')
  await call('listEvents', { id }, undefined, '?limit=0')
  await call('customerEvents', { external_id: 'c1' }, undefined, '?limit=5')
  // The Segment HTTP Tracking API: a batch, each single call, and the ingest status.
  await call(
    'segmentBatch',
    {},
    { batch: [{ type: 'group', groupId: 'c1', userId: 'p1', traits: { name: 'One' } }] },
  )
  for (const [operation, message] of Object.entries({
    segmentIdentify: { userId: 'p1', traits: { name: 'Pat', contry: 'x' } },
    segmentGroup: { groupId: 'c1', traits: { has_sso: 'yes' } },
    segmentTrack: { userId: 'p1', event: 'login', properties: { plan: 'pro' } },
    segmentPage: { userId: 'p1', name: 'Home' },
    segmentScreen: { anonymousId: 'a1', name: 'Home' },
    segmentAlias: { userId: 'p1', previousId: 'a1' },
  }))
    await call(operation, {}, message)
  await eventually(
    async () =>
      (await a.api('/api/v1/ingest/status', undefined, 'GET')).body.last_errors.length > 0,
    'applied',
  )
  await call('ingestStatus')
  await call('accountIngestStatus', { id })

  for (const prefix of ['', 'Alias']) {
    const customer = `n${prefix}`
    const contact = `q${prefix}`
    await call(
      `createCustomer${prefix}`,
      {},
      { external_id: customer, name: 'New', owner_email: 'owner@acme.test' },
    )
    await call(`createCustomer${prefix}`, {}, { external_id: customer, name: 'New' })
    await call(`getCustomer${prefix}`, { external_id: customer })
    await call(`getCustomer${prefix}`, { external_id: 'c1' })
    await call(
      `updateCustomer${prefix}`,
      { external_id: customer },
      { name: 'Renamed', attributes: { tier: 'b' } },
    )
    await call(
      `createContact${prefix}`,
      { external_id: customer },
      { contact_external_id: contact, contact_name: 'Q' },
    )
    await call(`getContact${prefix}`, { external_id: customer, contact_id: contact })
    await call(
      `updateContact${prefix}`,
      { external_id: customer, contact_id: contact },
      { contact_name: 'Q2' },
    )
    await call(`deleteContact${prefix}`, { external_id: customer, contact_id: contact })
    await call(`getContact${prefix}`, { external_id: customer, contact_id: contact })
    await call(`deleteCustomer${prefix}`, { external_id: customer })
  }
  await call('setCustomerTags', { id, external_id: 'c1' }, { titles: ['VIP'] })
  await call('setContactTags', { id, external_id: 'p1' }, { titles: ['VIP'] })
  await call('getCustomer', { external_id: 'c1' })
  await call('keyAccount')
  await call('accountUsers')

  // People: an invite taken up, a session, and what an admin of the account does with it.
  const boss = { email: 'boss@acme.test', password: 'contract password' }
  const invited = await call('addUser', { id }, { email: boss.email, role: 'admin' })
  await call('setPassword', {}, { token: invited.body.invite_token, password: boss.password })
  await call('setPassword', {}, { token: invited.body.invite_token, password: boss.password })
  await call('signIn', {}, { ...boss, password: 'wrong password' })
  const signed = await call('signIn', {}, boss)
  const cookie = /service_session=[^;]*/.exec(signed.headers.get('set-cookie')!)![0]
  session = { cookie, 'x-csrf-token': signed.body.csrf_token, origin: s.base }
  await call('me')
  const colleague = await call(
    'inviteAccountUser',
    {},
    { email: 'colleague@acme.test', role: 'manager' },
  )
  await call('inviteAccountUser', {}, { email: 'colleague@acme.test' })
  await call('resetAccountUser', { user_id: colleague.body.id })
  await call('setAccountUserRole', { user_id: colleague.body.id }, { role: 'viewer' })
  await call('setAccountUserRole', { user_id: signed.body.user.id }, { role: 'viewer' })
  await call('removeAccountUser', { user_id: colleague.body.id })
  await call('removeAccountUser', { user_id: colleague.body.id })
  const third = await call('addUser', { id }, { email: 'third@acme.test' })
  await call('resetUser', { id, user_id: third.body.id })
  await call('setUserRole', { id, user_id: third.body.id }, { role: 'manager' })
  await call('removeUser', { id, user_id: third.body.id })
  const own = {
    issuer: 'https://idp.acme.test',
    client_id: 'c',
    client_secret: 's',
    domains: ['acme.test'],
  }
  await call('getAccountSso')
  await call('setAccountSso', {}, { ...own, default_role: 'viewer' })
  await call('getAccountSso')
  await call('removeAccountSso')
  await call('signOut')
  await call('me')
  // SSO: a start without a provider, a callback of no sign-in, then the provider set. The two
  // redirects' 302 needs a provider: test/sso.test.ts drives them against oidc-provider.
  await call('ssoStart', { account_id: id })
  // The callback answers a refusal with a redirect to the console's sign-in page, not a Problem.
  const back = await fetch(`${s.base}/auth/v1/sso/callback?state=x&code=y`, { redirect: 'manual' })
  assert.equal(back.status, 302)
  assert.match(back.headers.get('location')!, /\/console#sso_error=invalid_state&/)
  const sso = {
    issuer: 'https://idp.acme.test',
    client_id: 'c',
    client_secret: 's',
    domains: ['acme.test'],
  }
  await call('setSso', { id }, { ...sso, default_role: 'viewer' })
  const model = (await call('getScoring', { id })).body
  await call('previewScoring', { id }, { model, external_id: 'c1' })
  await call('previewScoring', { id }, { model, external_id: 'nobody' })

  const gold = { propertyName: 'tier', operator: 'EQ', value: 'gold' }
  const segment = await call('createSegment', {}, { name: 'Gold', filters: [gold] })
  const segment_id = segment.body.id
  await call('createSegment', {}, { name: 'Gold', filters: [] })
  await call(
    'updateSegment',
    { segment_id },
    {
      name: 'Gold or VIP',
      where: { or: [gold, { propertyName: 'tags', operator: 'EQ', value: 'VIP' }] },
    },
  )
  await eventually(
    async () => (await a.api(`/api/v1/segments/${segment_id}`, undefined, 'GET')).body.members,
    'members',
  )
  await call('getSegment', { segment_id })
  await call('listSegments')
  await call('weekReport', {}, undefined, '?days=30')
  assert.equal(
    (await call('searchSegment', { segment_id }, { limit: 1, properties: ['tier'] })).body.results
      .length,
    1,
  )
  assert.equal(
    (await call('segmentHistory', { segment_id }, undefined, '?limit=1')).body.results.length,
    1,
  )
  await call('deleteProperty', { id, entity: 'customer', codename: 'tier' })
  await call('deleteSegment', { segment_id })
  await call('getSegment', { segment_id })
  await call('deleteProperty', { id, entity: 'customer', codename: 'tier' })

  const [delivery] = await settled(s, a, hook.body.id, 3)
  await call('listDeliveries', { id, webhook_id: hook.body.id }, undefined, '?limit=2')
  await call('redeliver', { id, webhook_id: hook.body.id, delivery_id: delivery.id })
  await call(
    'recoverDeliveries',
    { id, webhook_id: hook.body.id },
    { since: '2000-01-01T00:00:00Z' },
  )
  await call('testWebhook', { id, webhook_id: hook.body.id }, { event: 'customer.churned' })
  await call('testWebhook', { id, webhook_id: hook.body.id }, { event: 'customer.deleted' })
  await call('listNotifications', { id }, undefined, '?user_email=owner%40acme.test')

  // Privacy: exports (streamed), erasures with a key that has the erase scope, and suppressions.
  await call('exportContact', { external_id: 'c1', contact_id: 'p1' })
  await call('exportCustomer', { external_id: 'c1' })
  const eraser = (await call('createKey', { id }, { scopes: ['erase'] })).body.token
  const erasure = await call('requestErasure', {}, { customers: ['c2'] }, '', eraser)
  await eventually(
    async () =>
      (await call('getErasure', { erasure_id: erasure.body.id }, undefined, '', eraser)).body
        .status === 'done',
    'the erasure',
  )
  const byAdmin = await call(
    'erase',
    { id },
    { contacts: [{ customer_external_id: 'c1', contact_external_id: 'p9' }] },
  )
  await call('getErasureAdmin', { id, erasure_id: byAdmin.body.id })
  await call('listSuppressions', {}, undefined, '', eraser)
  await call('liftSuppression', { entity: 'customer', external_id: 'c2' }, undefined, '', eraser)
  await call('listUploads', { id }, undefined, '?status=processed')
  // A failed upload (a constraint the test adds makes it fail past validation) is retried,
  // then cancelled.
  await s.sql`alter table customers add constraint no_forbidden_names check (name <> 'Forbidden')
    not valid`
  try {
    const bad = await a.api('/api/v1/customers', {
      customers: [{ external_id: 'f', name: 'Forbidden' }],
    })
    assert.equal((await waitForUpload(a.api, bad.body.upload_id)).status, 'failed')
    await call('retryUpload', { id, upload_id: bad.body.upload_id })
    await call('cancelUpload', { id, upload_id: bad.body.upload_id })
  } finally {
    await s.sql`alter table customers drop constraint no_forbidden_names`
  }
  await call('cancelUpload', { id, upload_id: upload.body.upload_id })
  await call('removeWebhook', { id, webhook_id: hook.body.id })
  await call('listBackups', {})
  await call('startBackup', {})
  // The audit log of all the above: the account's (a key with the audit scope, the operator's view)
  // and the operator's own, a page of each with its paging.
  const auditor = (await call('createKey', { id }, { scopes: ['audit'] })).body.token
  await call('listAudit', {}, undefined, '?limit=2', auditor)
  await call('listAccountAudit', { id }, undefined, '?limit=2')
  await call('listOperatorAudit', {})
  // The churn model: 20 churned and 20 active customers are the least a training takes.
  await call('getChurnModel', {})
  await a
    .api('/api/v1/customers', {
      customers: Array.from({ length: 40 }, (_, i) => ({ external_id: `m${i}`, name: `M${i}` })),
    })
    .then((res) => waitForUpload(a.api, res.body.upload_id))
  await s.sql`update customers set is_churned = true, churned_date = current_date
    where account_id = ${id} and external_id like 'm%' and substr(external_id, 2)::int < 20`
  await call('trainChurnModel', {}, {})
  // The operator's view of the same model, and its training of the account.
  await call('getAccountChurnModel', { id })
  await call('trainAccountChurnModel', { id }, {})

  // Refusals: each is documented for its operation and is Problem Details.
  await call('searchCustomers', {}, { filter: [] })
  await call('getUpload', { upload_id: 999_999 })
  await call('getAccount', { id: 999_999 })
  await call('createTag', { id }, { title: 'VIP' })
  await call(
    'uploadCustomers',
    {},
    { customers: [{ external_id: 'd', name: 'D', metrics: [{ date: '2026-02-30' }] }] },
  )

  // The check itself bites: a field the document does not name fails it.
  const customer = doc.components.schemas.Customer
  const good = (await a.api('/api/v1/customer/c1', undefined, 'GET')).body
  delete good.score_explanation
  delete good.churn_drivers
  assert.equal(validate(customer, good), null)
  assert.notEqual(validate(customer, { ...good, surprise: 1 }), null)
  assert.notEqual(validate(customer, { ...good, createdAt: 'yesterday' }), null)

  const redirects = ['ssoStart', 'ssoCallback']
  const missed = [...ops.keys()].filter(
    (name) => !redirects.includes(name) && ![...(answered.get(name) ?? [])].some((st) => st < 300),
  )
  assert.deepEqual(missed, [], 'operations never answered with success')
  assert.ok(
    [...answered.values()].some((st) => st.has(409)) &&
      [...answered.values()].some((st) => st.has(404)),
  )
})

const QUERY_TITLE =
  'query parameters are parsed by their declared schemas: a repeated one, an empty one or one outside its enum ' +
  'is a 400 naming it'
test(QUERY_TITLE, async () => {
  const a = await s.account('Query')
  const refusedAt = async (path: string, admin: boolean) => {
    const res = admin ? await s.admin('GET', path) : await a.api(path, undefined, 'GET')
    assert.equal(res.status, 400, `${path}: ${JSON.stringify(res.body)}`)
    return res.body.errors.map((e: { path: string }) => e.path)
  }
  const own = '/api/v1/uploads'
  const acct = `/accounts/${a.id}`
  for (const [path, admin, name] of [
    [`${own}?stuck=yes`, false, 'stuck'],
    [`${own}?stuck=`, false, 'stuck'],
    [`${own}?status=failed&status=failed`, false, 'status'],
    [`${own}?status=`, false, 'status'],
    [`${acct}/uploads?stuck=1`, true, 'stuck'],
    [`${acct}/uploads?status=lost`, true, 'status'],
    [`${acct}/notifications?user_email=a@x.test&user_email=b@x.test`, true, 'user_email'],
    [`${acct}/notifications?user_email=`, true, 'user_email'],
    [`${acct}/events?limit=`, true, 'limit'],
    [`${acct}/events?limit=1e3`, true, 'limit'],
    [`${acct}/events?limit=2&limit=2`, true, 'limit'],
    [`${acct}/events?customer=c1&customer=c2`, true, 'customer'],
    ['/api/v1/customer/c1/events?limit=0', false, 'limit'],
    ['/api/v1/customer/c1/events?limit=05', false, 'limit'],
    ['/api/v1/customer/c1/events?limit=5.0', false, 'limit'],
  ] as const) {
    assert.deepEqual(await refusedAt(path, admin), [`/query/${name}`], path)
  }
  // A number parameter takes canonical decimal integers only, and says so.
  const spelled = await a.api('/api/v1/customer/c1/events?limit=05', undefined, 'GET')
  assert.match(spelled.body.errors[0].message, /whole number in decimal digits/)
  // Both wrong: both named.
  assert.deepEqual(await refusedAt(`${own}?status=x&stuck=x`, false), [
    '/query/status',
    '/query/stuck',
  ])
  // The declared values still filter, defaults apply, and an undeclared parameter is ignored.
  assert.equal((await a.api(`${own}?stuck=true&status=failed`, undefined, 'GET')).status, 200)
  assert.equal((await a.api(`${own}?stuck=false&cache=1`, undefined, 'GET')).status, 200)
  const events = await s.admin('GET', `${acct}/events?limit=1000`)
  assert.equal(events.status, 200)
  assert.equal(events.body.customer, null)
})

test('a PATCH that changes nothing is refused, as its minProperties says', async () => {
  const a = await s.account('Patch')
  const hook = await s.admin('POST', `/accounts/${a.id}/webhooks`, {
    url: r.url,
    events: ['customer.created'],
  })
  for (const [path, published] of [
    [`/accounts/${a.id}`, '/admin/v1/accounts/{id}'],
    [`/accounts/${a.id}/webhooks/${hook.body.id}`, '/admin/v1/accounts/{id}/webhooks/{webhook_id}'],
  ]) {
    assert.equal(
      doc.paths[published].patch.requestBody.content['application/json'].schema.minProperties,
      1,
      path,
    )
    assert.equal((await s.admin('PATCH', path, {})).status, 400, path)
  }
})
