import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { recomputeSegment } from '../src/segments/members.ts'
import { startTestService, type Call, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'
import { search, upload } from './helpers/search.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
let acme: Account
let other: Account

const ok = async (pending: Promise<Call>, status = 200) => {
  const res = await pending
  assert.equal(res.status, status, JSON.stringify(res.body))
  return res.body
}
const refused = async (pending: Promise<Call>, status: number) => {
  const res = await pending
  assert.equal(res.status, status, JSON.stringify(res.body))
  assert.equal(res.headers.get('content-type'), 'application/problem+json')
  return res.body
}
const create = (account: Account, body: unknown) => account.api('/api/v1/segments', body)
const get = (account: Account, path: string) => account.api(path, undefined, 'GET')
const history = async (account: Account, id: number) =>
  (await ok(get(account, `/api/v1/segments/${id}/history?limit=1000`))).results as {
    customer: string
    entered_at: string
    exited_at: string | null
  }[]
const members = async (account: Account, id: number) =>
  (await history(account, id))
    .filter((h) => h.exited_at === null)
    .map((h) => h.customer)
    .sort()
const exits = async (account: Account, id: number) =>
  (await history(account, id))
    .filter((h) => h.exited_at !== null)
    .map((h) => h.customer)
    .sort()
// Waits until the segment's recomputation has run since `since` (its computed_at).
const computedAfter = (account: Account, id: number, since: string | null = null) =>
  eventually(async () => {
    const seg = await ok(get(account, `/api/v1/segments/${id}`))
    return seg.computed_at !== null && (since === null || seg.computed_at > since) && seg
  }, `segment ${id} recomputed`)
const us = { propertyName: 'country', operator: 'EQ', value: 'US' }

before(async () => {
  s = await startTestService()
  acme = await scoredAccount(s, 'Acme')
  other = await scoredAccount(s, 'Other')
  await upload(acme, 'customers', [
    { external_id: 'c1', name: 'One', attributes: { country: 'US', has_sso: true }, metrics: [] },
    { external_id: 'c2', name: 'Two', attributes: { country: 'DE', has_sso: true }, metrics: [] },
    { external_id: 'c3', name: 'Three', attributes: { country: 'FR' }, metrics: [] },
    { external_id: 'c4', name: 'Four', attributes: { country: 'US' }, metrics: [] },
  ])
  await upload(other, 'customers', [
    { external_id: 'c1', name: 'Other one', attributes: { country: 'US' } },
  ])
})
after(() => s?.stop())

test('create, list, read, replace and delete a segment', async () => {
  const created = await ok(create(acme, { name: ' US ', filters: [us] }), 201)
  assert.equal(created.name, 'US')
  assert.deepEqual(created.filters, [us])
  assert.equal(created.where, undefined)
  assert.equal(created.members, 0)
  const path = `/api/v1/segments/${created.id}`
  const read = await computedAfter(acme, created.id)
  assert.equal(read.members, 2)
  assert.deepEqual(await members(acme, created.id), ['c1', 'c4'])
  const listed = await ok(get(acme, '/api/v1/segments'))
  assert.deepEqual(
    listed.map((x: { id: number }) => x.id),
    [created.id],
  )

  const where = { or: [us, { propertyName: 'country', operator: 'EQ', value: 'FR' }] }
  const replaced = await ok(acme.api(path, { name: 'US or FR', where }, 'PUT'))
  assert.equal(replaced.name, 'US or FR')
  assert.deepEqual(replaced.where, where)
  assert.equal(replaced.filters, undefined, 'a replacement keeps nothing of the old search')
  await eventually(
    async () => (await members(acme, created.id)).join() === 'c1,c3,c4',
    'c3 entering',
  )

  await ok(acme.api(path, undefined, 'DELETE'), 204)
  await refused(get(acme, path), 404)
  await refused(acme.api(path, undefined, 'DELETE'), 404)
  await refused(acme.api(`${path}/search`, {}), 404)
  await refused(get(acme, `${path}/history`), 404)
})

test('a segment is validated against the property catalog on save, naming the path', async () => {
  const paths = async (body: unknown, method = 'POST', path = '/api/v1/segments') =>
    (await refused(acme.api(path, body, method), 400)).errors.map((e: { path: string }) => e.path)
  assert.deepEqual(
    await paths({ name: 'x', filters: [{ propertyName: 'nope', operator: 'EQ', value: '1' }] }),
    ['/filters/0/propertyName'],
  )
  assert.deepEqual(
    await paths({
      name: 'x',
      where: { and: [us, { propertyName: 'country', operator: 'GT', value: '1' }] },
    }),
    ['/where/and/1/operator'],
  )
  assert.deepEqual(
    await paths({ name: 'x', filters: [{ propertyName: 'logins', operator: 'EQ', value: 'a' }] }),
    ['/filters/0/value'],
  )
  assert.deepEqual(await paths({ name: 'x', filters: [us], where: us }), ['/where'])
  assert.deepEqual(await paths({ filters: [us] }), ['/name'])
  assert.deepEqual(await paths({ name: '', filters: [us] }), ['/name'])
  // A segment saves what picks the customers; paging and shaping belong to each member search.
  assert.deepEqual(await paths({ name: 'x', filters: [us], limit: 5 }), ['/limit'])
  assert.deepEqual(await paths({ name: 'x', filters: [us], properties: ['country'] }), [
    '/properties',
  ])
  const seg = await ok(create(acme, { name: 'valid', filters: [us] }), 201)
  const member = `/api/v1/segments/${seg.id}`
  assert.deepEqual(await paths({ filters: [us] }, 'POST', `${member}/search`), ['/filters'])
  assert.deepEqual(await paths({ limit: 0 }, 'POST', `${member}/search`), ['/limit'])
  assert.deepEqual(await paths({ properties: ['nope'] }, 'POST', `${member}/search`), [
    '/properties/0',
  ])
  assert.deepEqual(
    await paths({ name: 'valid', filters: [{ propertyName: 'x', operator: 'EQ' }] }, 'PUT', member),
    ['/filters/0/propertyName'],
  )
  await refused(get(acme, `${member}/history?limit=0`), 400)
  await ok(acme.api(member, undefined, 'DELETE'), 204)
})

test('names are unique per account: 409 on create and on rename', async () => {
  const a = await ok(create(acme, { name: 'Taken', filters: [] }), 201)
  const b = await ok(create(acme, { name: 'Free', filters: [] }), 201)
  const dup = await refused(create(acme, { name: 'Taken', filters: [us] }), 409)
  assert.match(dup.detail, /Taken/)
  await refused(acme.api(`/api/v1/segments/${b.id}`, { name: 'Taken', filters: [] }, 'PUT'), 409)
  // The same name in another account is another segment.
  const theirs = await ok(create(other, { name: 'Taken', filters: [] }), 201)
  for (const id of [a.id, b.id])
    await ok(acme.api(`/api/v1/segments/${id}`, undefined, 'DELETE'), 204)
  await ok(other.api(`/api/v1/segments/${theirs.id}`, undefined, 'DELETE'), 204)
})

test("a segment's member search answers what the same customer search does, page by page", async () => {
  const where = { not: { propertyName: 'country', operator: 'EQ', value: 'FR' } }
  const seg = await ok(create(acme, { name: 'Not FR', where }), 201)
  const pages = async (run: (after?: number) => Promise<Call>) => {
    const all: unknown[] = []
    for (let next: number | undefined; ; ) {
      const body = await ok(run(next))
      all.push(body)
      if (!body.paging) return all
      next = body.paging.next.after
    }
  }
  const page = (after?: number) => ({
    limit: 2,
    properties: ['country'],
    ...(after !== undefined && { after }),
  })
  const ofSegment = await pages((after) =>
    acme.api(`/api/v1/segments/${seg.id}/search`, page(after)),
  )
  const ofSearch = await pages((after) => search(acme, 'customers', { where, ...page(after) }))
  assert.equal(ofSegment.length, 2)
  assert.deepEqual(ofSegment, ofSearch)
  await ok(acme.api(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 204)
})

test('membership records entries and exits after an upload changes data', async () => {
  const seg = await ok(create(acme, { name: 'US members', filters: [us] }), 201)
  const first = await computedAfter(acme, seg.id)
  assert.deepEqual(await members(acme, seg.id), ['c1', 'c4'])
  await upload(acme, 'customers', [
    { external_id: 'c2', name: 'Two', attributes: { country: 'US' } },
    { external_id: 'c4', name: 'Four', attributes: { country: 'DE' } },
  ])
  await eventually(async () => (await members(acme, seg.id)).join() === 'c1,c2', 'c2 in, c4 out')
  assert.deepEqual(await exits(acme, seg.id), ['c4'])
  const stays = await history(acme, seg.id)
  const c4 = stays.find((h) => h.customer === 'c4')!
  assert.ok(c4.entered_at <= first.computed_at && c4.exited_at! > c4.entered_at)
  assert.equal((await ok(get(acme, `/api/v1/segments/${seg.id}`))).members, 2)

  // Back in: a second stay, the first one kept in the history.
  await upload(acme, 'customers', [
    { external_id: 'c4', name: 'Four', attributes: { country: 'US' } },
  ])
  await eventually(async () => (await members(acme, seg.id)).join() === 'c1,c2,c4', 'c4 back')
  assert.equal((await history(acme, seg.id)).filter((h) => h.customer === 'c4').length, 2)
  // Paging through the history: latest entry first.
  const firstPage = await ok(get(acme, `/api/v1/segments/${seg.id}/history?limit=1`))
  assert.equal(firstPage.results[0].customer, 'c4')
  assert.equal(firstPage.results[0].exited_at, null)
  const rest = await ok(
    get(acme, `/api/v1/segments/${seg.id}/history?after=${firstPage.paging.next.after}`),
  )
  assert.equal(rest.results.length, 3)

  // A deleted customer leaves the segment like any other.
  await ok(acme.api('/api/v1/customer/c2', undefined, 'DELETE'), 204)
  await eventually(async () => (await members(acme, seg.id)).join() === 'c1,c4', 'c2 deleted')
  await upload(acme, 'customers', [
    { external_id: 'c2', name: 'Two', attributes: { country: 'DE', has_sso: true } },
  ])
  await ok(acme.api(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 204)
})

test('membership follows a rescoring', async () => {
  // Fit: country US 100, DE 50, else -100 (weight 50), has_sso (weight 50).
  const seg = await ok(
    create(acme, {
      name: 'Good fit',
      filters: [{ propertyName: 'fitscore', operator: 'GTE', value: '50' }],
    }),
    201,
  )
  await computedAfter(acme, seg.id)
  const before = await members(acme, seg.id)
  assert.ok(before.includes('c1') && !before.includes('c3'), before.join())
  const model = await ok(s.admin('GET', `/accounts/${acme.id}/scoring`))
  const fit = [{ codename: 'country', weight: 100, values: { FR: 100 }, default: -100 }]
  await ok(
    s.admin('PUT', `/accounts/${acme.id}/scoring`, {
      ...model,
      customer: { ...model.customer, fit },
    }),
  )
  await eventually(async () => {
    const now = await members(acme, seg.id)
    return now.includes('c3') && !now.includes('c1')
  }, 'c3 in and c1 out after the rescoring')
  assert.ok((await exits(acme, seg.id)).includes('c1'))
  await ok(s.admin('PUT', `/accounts/${acme.id}/scoring`, model))
  await ok(acme.api(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 204)
})

test('the recomputation returns, inside its transaction, who entered and who left', async () => {
  const seg = await ok(create(acme, { name: 'Direct', filters: [us] }), 201)
  await computedAfter(acme, seg.id)
  const [c3] = await s.sql`select service_id from customers where account_id = ${acme.id}
      and external_id = 'c3'`
  const [c1] = await s.sql`select service_id from customers where account_id = ${acme.id}
      and external_id = 'c1'`
  const rollback = new Error('rollback')
  const change = await s.sql
    .begin(async (tx) => {
      // Changed behind the service's back (no job), so that only this call sees it, and undone.
      await tx`update customers set attributes = attributes || '{"country": "US"}'
        where account_id = ${acme.id} and external_id = 'c3'`
      await tx`update customers set attributes = attributes || '{"country": "FR"}'
        where account_id = ${acme.id} and external_id = 'c1'`
      const result = await recomputeSegment(tx, acme.id, seg.id)
      assert.deepEqual(await recomputeSegment(tx, acme.id, seg.id), {
        segment_id: seg.id,
        entered: [],
        exited: [],
      })
      throw Object.assign(rollback, { result })
    })
    .catch((err) =>
      err === rollback ? (err as Error & { result: unknown }).result : Promise.reject(err),
    )
  assert.deepEqual(change, {
    segment_id: seg.id,
    entered: [c3.service_id],
    exited: [c1.service_id],
  })
  assert.equal(await s.sql.begin((tx) => recomputeSegment(tx, acme.id, 0)), null, 'no such segment')
  await ok(acme.api(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 204)
})

test('a property a segment names cannot be deleted (409 naming the segments); unused, it goes', async () => {
  const seg = await ok(
    create(acme, {
      name: 'SSO',
      where: { not: { propertyName: 'has_sso', operator: 'EQ', value: 'true' } },
    }),
    201,
  )
  await ok(
    s.admin('POST', `/accounts/${acme.id}/properties`, {
      entity: 'customer',
      kind: 'attribute',
      codename: 'segment_only',
      type: 'string',
    }),
    201,
  )
  const named = await ok(
    create(acme, { name: 'Named', filters: [{ propertyName: 'segment_only', operator: 'KNOWN' }] }),
    201,
  )
  const path = `/accounts/${acme.id}/properties/customer/segment_only`
  const conflict = await refused(s.admin('DELETE', path), 409)
  assert.match(conflict.detail, /Named/)
  // The scoring model's properties are refused too, and system attributes.
  assert.match(
    (await refused(s.admin('DELETE', `/accounts/${acme.id}/properties/customer/has_sso`), 409))
      .detail,
    /scoring model/,
  )
  await refused(s.admin('DELETE', `/accounts/${acme.id}/properties/customer/crm_link`), 409)
  await refused(s.admin('DELETE', `/accounts/${acme.id}/properties/customer/nothing`), 404)
  await refused(s.admin('DELETE', `/accounts/${acme.id}/properties/thing/segment_only`), 404)
  await ok(acme.api(`/api/v1/segments/${named.id}`, undefined, 'DELETE'), 204)
  await ok(s.admin('DELETE', path), 204)
  const props = await ok(s.admin('GET', `/accounts/${acme.id}/properties`))
  assert.ok(!props.some((p: { codename: string }) => p.codename === 'segment_only'))
  await ok(acme.api(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 204)
})

test("another account's segments are out of reach", async () => {
  const seg = await ok(create(acme, { name: 'Mine', filters: [us] }), 201)
  const path = `/api/v1/segments/${seg.id}`
  await refused(get(other, path), 404)
  await refused(other.api(path, { name: 'Theirs', filters: [] }, 'PUT'), 404)
  await refused(other.api(`${path}/search`, {}), 404)
  await refused(get(other, `${path}/history`), 404)
  await refused(other.api(path, undefined, 'DELETE'), 404)
  assert.deepEqual(await ok(get(other, '/api/v1/segments')), [])
  // Other's c1 matches the same search but is never one of acme's members.
  await computedAfter(acme, seg.id)
  const results = (await ok(acme.api(`${path}/search`, {}))).results
  assert.deepEqual(
    results.map((r: { id: string }) => r.id),
    await members(acme, seg.id),
  )
  assert.ok(results.every((r: { name: string }) => r.name !== 'Other one'))
  await ok(acme.api(path, undefined, 'DELETE'), 204)
})

test('reading and running segments takes the search scope, saving them the upload scope', async () => {
  const key = await ok(s.admin('POST', `/accounts/${acme.id}/keys`, { scopes: ['search'] }), 201)
  const reader = s.api(key.token)
  await refused(reader('/api/v1/segments', { name: 'No', filters: [] }), 403)
  const seg = await ok(create(acme, { name: 'Readable', filters: [] }), 201)
  await ok(reader(`/api/v1/segments/${seg.id}`, undefined, 'GET'))
  await ok(reader(`/api/v1/segments/${seg.id}/search`, {}))
  await refused(reader(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 403)
  await ok(acme.api(`/api/v1/segments/${seg.id}`, undefined, 'DELETE'), 204)
})
