// Citus only (test/run.ts runs it in the Citus pass, where `service-api` connections run with
// citus.multi_task_query_log_level = error): the single-record write routes touch one shard. A
// statement that fans out, or that Citus cannot route, answers 500 here.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { scoredAccount } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let a: Awaited<ReturnType<typeof scoredAccount>>
before(async () => {
  s = await startTestService()
  // A second account, so that the cluster holds more than one tenant's shard.
  await scoredAccount(s, 'Other')
  a = await scoredAccount(s)
})
after(() => s.stop())

test('a customer and its contact are created, read, updated and deleted one at a time', async () => {
  const expect = async (status: number, res: Promise<{ status: number; body: any }>) => {
    const done = await res
    assert.equal(done.status, status, JSON.stringify(done.body))
    return done.body
  }
  const created = await expect(
    201,
    a.api('/api/v1/customer', { external_id: 'c1', name: 'One', attributes: { country: 'US' } }),
  )
  assert.equal(created.id, 'c1')
  await expect(409, a.api('/api/v1/customer', { external_id: 'c1', name: 'Again' }))
  // The create told the account's user, in its transaction (a row per user, on the
  // account's shard).
  const told = await expect(200, s.admin('GET', `/accounts/${a.id}/notifications`))
  assert.deepEqual(
    told.map((n: { user_email: string; kind: string }) => [n.user_email, n.kind]),
    [['owner@acme.test', 'import.processed']],
  )
  const updated = await expect(
    200,
    a.api(
      '/api/v1/customer/c1',
      { name: 'Uno', owner_email: 'owner@acme.test', is_churned: true },
      'PUT',
    ),
  )
  assert.equal(updated.name, 'Uno')
  assert.equal(updated.is_churned, true)
  assert.equal(updated.owner, 'owner@acme.test')
  const back = await expect(200, a.api('/api/v1/customer/c1', { is_churned: false }, 'PUT'))
  assert.equal(back.is_churned, false)

  const contact = await expect(
    201,
    a.api('/api/v1/customer/c1/contact', { contact_external_id: 'p1', contact_name: 'Pat' }),
  )
  assert.equal(contact.id, 'p1')
  await expect(
    409,
    a.api('/api/v1/customer/c1/contact', { contact_external_id: 'p1', contact_name: 'Pat' }),
  )
  const renamed = await expect(
    200,
    a.api('/api/v1/customer/c1/contact/p1', { contact_name: 'Patricia' }, 'PUT'),
  )
  assert.equal(renamed.name, 'Patricia')
  // The exports (reads, but their subqueries once fanned out): the record found, an
  // unknown one 404.
  assert.equal(
    (await expect(200, a.api('/api/v1/customer/c1/export', undefined, 'GET'))).contacts.length,
    1,
  )
  assert.equal(
    (await expect(200, a.api('/api/v1/customer/c1/contact/p1/export', undefined, 'GET'))).contact
      .record.name,
    'Patricia',
  )
  await expect(404, a.api('/api/v1/customer/c9/export', undefined, 'GET'))
  await expect(404, a.api('/api/v1/customer/c1/contact/p9/export', undefined, 'GET'))
  await expect(200, a.api('/api/v1/customer/c1/contact/p1', undefined, 'GET'))
  await expect(204, a.api('/api/v1/customer/c1/contact/p1', undefined, 'DELETE'))
  await expect(404, a.api('/api/v1/customer/c1/contact/p1', undefined, 'GET'))

  await expect(204, a.api('/api/v1/customer/c1', undefined, 'DELETE'))
  await expect(404, a.api('/api/v1/customer/c1', undefined, 'GET'))
  await expect(404, a.api('/api/v1/customer/c1', { name: 'Gone' }, 'PUT'))
})

test('a segment is saved, changed, run and deleted; an erasure is asked for, its suppression lifted', async () => {
  const where = { and: [{ propertyName: 'country', operator: 'EQ', value: 'US' }] }
  const saved = await a.api('/api/v1/segments', { name: 'US', where })
  assert.equal(saved.status, 201, JSON.stringify(saved.body))
  const path = `/api/v1/segments/${saved.body.id}`
  const changed = await a.api(path, { name: 'In the US', where }, 'PUT')
  assert.equal(changed.status, 200, JSON.stringify(changed.body))
  assert.equal(changed.body.name, 'In the US')
  assert.equal((await a.api(`${path}/search`, {})).status, 200)
  assert.equal((await a.api(path, undefined, 'DELETE')).status, 204)
  assert.equal((await a.api(path, undefined, 'GET')).status, 404)

  assert.equal((await a.api('/api/v1/customer', { external_id: 'gone', name: 'Gone' })).status, 201)
  const key = await s.admin('POST', `/accounts/${a.id}/keys`, { scopes: ['erase'] })
  const eraser = s.api(key.body.token)
  const erasure = await eraser('/api/v1/erasures', { customers: ['gone'] })
  assert.equal(erasure.status, 202, JSON.stringify(erasure.body))
  const asked = await eraser(`/api/v1/erasures/${erasure.body.id}`, undefined, 'GET')
  assert.equal(asked.status, 200, JSON.stringify(asked.body))
  const lifted = await eraser('/api/v1/suppressions/customer/gone', undefined, 'DELETE')
  assert.ok([204, 404].includes(lifted.status), JSON.stringify(lifted.body))
})
