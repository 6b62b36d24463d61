// PATCH /admin/v1/accounts/{id}: a rename or a new source of truth, through the API and the CLI.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { invokeAdmin } from '../src/cli/admin.ts'
import { routes } from '../src/api/routes.ts'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'

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
  assert.equal(
    (await s.admin('PATCH', `/accounts/${a.id}`, { source_of_truth: 'file' })).status,
    400,
  )
  assert.equal((await s.admin('PATCH', '/accounts/999999', { name: 'x' })).status, 404)
})

test('the CLI runs the same operation', async () => {
  const a = await s.account('Cli')
  const route = routes.find((r) => r.name === 'update-account')!
  const reply = await invokeAdmin(route, { id: String(a.id) }, '{"name":"By CLI"}', s.app)
  assert.deepEqual([reply.ok, (reply.body as { name: string }).name], [true, 'By CLI'])
})

// The tables without a foreign key to accounts (sql/008, sql/041) go with it through delete_account
// (sql/047), which replaced the delete triggers on accounts.
test('delete_account removes the account with its events, tracked keys and Segment messages', async () => {
  const a = await scoredAccount(s, 'Leaving')
  await uploadAndWait(a.api, 'customers', [{ external_id: 'c1', name: 'One' }])
  assert.equal(
    (await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['leaving.test'] })).status,
    200,
  )
  const event = { name: 'login', timestamp: Date.now(), identification: { customer: 'c1' } }
  const tracked = await s.call(
    'POST',
    '/api/tracker/track',
    { trackerKey: a.trackerKey, events: [{ ...event, data: { customer: { country: 'US' } } }] },
    { 'service-key': a.token },
  )
  assert.equal(tracked.status, 200, JSON.stringify(tracked.body))
  const basic = `Basic ${Buffer.from(`${a.token}:`).toString('base64')}`
  const identify = {
    type: 'identify',
    messageId: 'm1',
    userId: 'nobody-yet',
    traits: { name: 'N' },
  }
  assert.equal(
    (await s.call('POST', '/v1/identify', identify, { authorization: basic })).status,
    200,
  )
  const counts = async () =>
    (
      await s.sql`select (select count(*) from tracking_events where account_id = ${a.id})::int
        as events,
        (select count(*) from tracked_keys where account_id = ${a.id})::int as keys,
        (select count(*) from segment_messages where account_id = ${a.id})::int as messages,
        (select count(*) from customers where account_id = ${a.id})::int as customers`
    )[0]
  await eventually(async () => (await counts()).keys > 0, 'the event applied')
  assert.deepEqual(
    { ...(await counts()), keys: 1 },
    { events: 1, keys: 1, messages: 1, customers: 1 },
  )
  const [{ deleted }] = await s.sql`select delete_account(${a.id}) as deleted`
  assert.equal(deleted, true)
  assert.deepEqual({ ...(await counts()) }, { events: 0, keys: 0, messages: 0, customers: 0 })
  assert.equal((await s.admin('GET', `/accounts/${a.id}`)).status, 404)
  assert.equal((await s.sql`select delete_account(${a.id}) as deleted`)[0].deleted, false)
})
