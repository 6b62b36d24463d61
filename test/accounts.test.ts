// PATCH /admin/v1/accounts/{id}: a rename or a new source of truth, through the API and the CLI.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { invokeAdmin } from '../src/cli/admin.ts'
import { routes } from '../src/api/routes.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService()
})
after(() => s.stop())

test('an account is renamed and handed to FILE imports; its API uploads then answer 406', async () => {
  const a = await s.account('Before')
  const renamed = await s.admin('PATCH', `/accounts/${a.id}`, { name: 'After' })
  assert.equal(renamed.status, 200)
  assert.equal(renamed.body.name, 'After')
  assert.equal(renamed.body.source_of_truth, 'API')
  const file = await s.admin('PATCH', `/accounts/${a.id}`, { source_of_truth: 'FILE' })
  assert.deepEqual([file.body.name, file.body.source_of_truth], ['After', 'FILE'])
  assert.equal((await s.admin('GET', `/accounts/${a.id}`)).body.source_of_truth, 'FILE')
  const upload = await a.api('/api/v1/customers', { customers: [{ external_id: 'x', name: 'X' }] })
  assert.equal(upload.status, 406)
})

test('refusals: nothing to change, an unknown key, a bad value, no such account', async () => {
  const a = await s.account('Refusals')
  assert.equal((await s.admin('PATCH', `/accounts/${a.id}`, {})).status, 400)
  const typo = await s.admin('PATCH', `/accounts/${a.id}`, { nmae: 'x' })
  assert.equal(typo.status, 400)
  assert.match(typo.body.errors[0].message, /did you mean name\?/)
  assert.equal((await s.admin('PATCH', `/accounts/${a.id}`, { source_of_truth: 'file' })).status, 400)
  assert.equal((await s.admin('PATCH', '/accounts/999999', { name: 'x' })).status, 404)
})

test('the CLI runs the same operation', async () => {
  const a = await s.account('Cli')
  const route = routes.find((r) => r.name === 'update-account')!
  const reply = await invokeAdmin(route, { id: String(a.id) }, '{"name":"By CLI"}', s.app)
  assert.deepEqual([reply.ok, (reply.body as { name: string }).name], [true, 'By CLI'])
})
