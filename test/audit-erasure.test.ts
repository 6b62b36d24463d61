// The audit log and erasure (issue 47): the entries stay, the target segments that named the erased
// people are blanked. Apart from test/audit.test.ts; both run in the Citus pass too.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
after(() => s.stop())

const key = async (accountId: number, body: object) => {
  const made = await s.admin('POST', `/accounts/${accountId}/keys`, body)
  assert.equal(made.status, 201, JSON.stringify(made.body))
  return { id: made.body.id as number, api: s.api(made.body.token) }
}
let a: Awaited<ReturnType<typeof scoredAccount>>
let writer: Awaited<ReturnType<typeof key>>
let aAudit: Awaited<ReturnType<typeof key>>['api']
const log = async (query = '') => {
  const res = await aAudit(`/api/v1/audit${query}`, undefined, 'GET')
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body as { entries: any[] }
}
before(async () => {
  s = await startTestService()
  a = await scoredAccount(s, 'Acme')
  writer = await key(a.id, { scopes: ['upload'] })
  aAudit = (await key(a.id, { scopes: ['audit'] })).api
  assert.equal(
    (await writer.api('/api/v1/customer', { external_id: 'acme-1', name: 'Acme One' })).status,
    201,
  )
})

test('an erasure blanks the target segments that named the person; the entries stay', async () => {
  const eraser = await key(a.id, { scopes: ['erase'] })
  const person = 'erase-me-7'
  assert.equal(
    (await writer.api('/api/v1/customer', { external_id: person, name: 'Gone Soon' })).status,
    201,
  )
  assert.equal(
    (
      await writer.api(`/api/v1/customer/${person}/contact`, {
        contact_external_id: 'pat-9',
        contact_name: 'Pat',
      })
    ).status,
    201,
  )
  const named = (await log('?limit=1000')).entries.filter((e) => e.target.includes(person))
  assert.deepEqual(
    named.map((e) => e.target),
    [`customer/${person}/contact/pat-9`, `customer/${person}`],
  )
  const res = await eraser.api('/api/v1/erasures', { customers: [person] })
  assert.equal(res.status, 202, JSON.stringify(res.body))
  const done = await eventually(async () => {
    const got = await eraser.api(`/api/v1/erasures/${res.body.id}`, undefined, 'GET')
    return got.body.status !== 'pending' && got.body
  }, 'erasure')
  assert.equal(done.status, 'done', JSON.stringify(done))
  assert.equal(done.counts.audit_entries, 2)
  const after = (await log('?limit=1000')).entries
  assert.deepEqual(
    named.map((e) => after.find((x) => x.id === e.id).target),
    ['customer/(erased)/contact/(erased)', 'customer/(erased)'],
  )
  assert.ok(
    after.some((e) => e.target === 'customer/acme-1'),
    'entries of others keep their targets',
  )
  const [{ n }] = await s.sql`select count(*)::int as n from audit_entries
    where account_id = ${a.id} and array_to_string(target, '/') like ${`%${person}%`}`
  assert.equal(n, 0)
})
