// The audit log (issue 47): every change through the API is recorded in the change's transaction,
// with who, what, on what, when, from where and its status; a refused change is recorded with its
// 4xx; one account's key never reads another's entries; retention and backups. Erasure:
// test/audit-erasure.test.ts (erasures do not run on Citus yet, docs/operations.md).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { routes } from '../src/api/routes.ts'
import { purgeAudit } from '../src/audit/retention.ts'
import { backup, restore } from '../src/backups/dump.ts'
import { invokeAdmin } from '../src/cli/admin.ts'
import { connect } from '../src/db/client.ts'
import { audited } from '../src/http/audit.ts'
import { clusterFromEnv } from './helpers/citus.ts'
import { freshDatabase } from './helpers/db.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
type Account = Awaited<ReturnType<TestService['account']>>
let a: Account
let b: Account
// Each account's log reader (scope `audit` only), and A's writer, a named key of its own.
let aAudit: ReturnType<TestService['api']>
let bAudit: ReturnType<TestService['api']>
let writer: { id: number; api: ReturnType<TestService['api']> }
const dir = mkdtempSync(join(tmpdir(), 'service-audit-'))

const key = async (account: Account, body: object) => {
  const made = await s.admin('POST', `/accounts/${account.id}/keys`, body)
  assert.equal(made.status, 201, JSON.stringify(made.body))
  return { id: made.body.id as number, api: s.api(made.body.token) }
}
const log = async (reader: ReturnType<TestService['api']>, query = '') => {
  const res = await reader(`/api/v1/audit${query}`, undefined, 'GET')
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body as { entries: any[]; paging?: { next: { after: number } } }
}
const latest = async (reader = aAudit) => (await log(reader, '?limit=1')).entries[0]

before(async () => {
  s = await startTestService({ backupDir: dir })
  a = await scoredAccount(s, 'Acme')
  b = await scoredAccount(s, 'Other')
  aAudit = (await key(a, { name: 'auditor', scopes: ['audit'] })).api
  bAudit = (await key(b, { name: 'auditor', scopes: ['audit'] })).api
  writer = await key(a, { name: 'crm-sync', scopes: ['search', 'upload'] })
})
after(async () => {
  await s.stop()
  rmSync(dir, { recursive: true, force: true })
})

test('every row of a method but GET is audited, but the reads by POST and the event intake it names', () => {
  const left = routes
    .filter((r) => r.method !== 'GET' && !audited(r))
    .map((r) => `${r.name}: ${r.unaudited ?? `auth ${r.auth}`}`)
  assert.deepEqual(left.sort(), [
    'aggregate-customers: read',
    'preview-scoring: read',
    'search-contacts: read',
    'search-customers: read',
    'search-segment: read',
    'segment-alias: intake',
    'segment-batch: intake',
    'segment-group: intake',
    'segment-identify: intake',
    'segment-page: intake',
    'segment-screen: intake',
    'segment-track: intake',
    // No one to record before they sign in: the sign-in and the password a link sets.
    'set-password: auth none',
    'sign-in: auth none',
    'track: intake',
  ])
  assert.ok(routes.every((r) => r.method !== 'GET' || !audited(r)))
})

test("a key's change is recorded: actor, action, target, status, address and time", async () => {
  const before = Date.now()
  const created = await writer.api('/api/v1/customer', { external_id: 'acme-1', name: 'Acme One' })
  assert.equal(created.status, 201, JSON.stringify(created.body))
  const entry = await latest()
  assert.deepEqual(
    { ...entry, id: undefined, at: undefined },
    {
      id: undefined,
      at: undefined,
      actor: { type: 'key', id: writer.id, name: 'crm-sync' },
      action: 'createCustomer',
      target: 'customer/acme-1',
      status: 201,
      address: '127.0.0.1',
    },
  )
  assert.ok(
    Date.parse(entry.at) >= before - 1000 && Date.parse(entry.at) <= Date.now() + 1000,
    entry.at,
  )
  const updated = await writer.api('/api/v1/customer/acme-1', { name: 'Acme Uno' }, 'PUT')
  assert.equal(updated.status, 200, JSON.stringify(updated.body))
  const next = await latest()
  assert.deepEqual(
    [next.action, next.target, next.status],
    ['updateCustomer', 'customer/acme-1', 200],
  )
  assert.ok(next.id > entry.id)
  // A read is not a change.
  assert.equal((await writer.api('/api/v1/customer/acme-1', undefined, 'GET')).status, 200)
  assert.equal((await latest()).id, next.id)
})

test("the operator's change is recorded in the account's log, over HTTP and from the CLI", async () => {
  const revoked = await s.admin('DELETE', `/accounts/${a.id}/keys/${(await key(a, {})).id}`)
  assert.equal(revoked.status, 204)
  const entry = await latest()
  assert.deepEqual(entry.actor, { type: 'operator', id: null, name: 'operator' })
  assert.equal(entry.action, 'revokeKey')
  assert.match(entry.target, new RegExp(`^accounts/${a.id}/keys/\\d+$`))
  assert.equal(entry.status, 204)
  const viaAdmin = await s.admin('GET', `/accounts/${a.id}/audit?limit=1`)
  assert.equal(viaAdmin.status, 200, JSON.stringify(viaAdmin.body))
  assert.deepEqual(viaAdmin.body.entries, [entry])

  const route = routes.find((r) => r.name === 'create-tag')!
  const reply = await invokeAdmin(route, { id: String(a.id) }, '{"title":"From CLI"}', {
    ...s.app,
    sql: s.app.admin,
  })
  assert.ok(reply.ok, JSON.stringify(reply.body))
  const cli = await latest()
  assert.deepEqual(
    [cli.action, cli.target, cli.address],
    ['createTag', `accounts/${a.id}/tags/${(reply.body as { id: number }).id}`, null],
  )
})

test('the entry is written in the change’s transaction: when it cannot be, the change is not made', async () => {
  await s.sql`alter table audit_entries add constraint no_tags_today check (action <> 'createTag')
    not valid`
  try {
    const res = await s.admin('POST', `/accounts/${a.id}/tags`, { title: 'Never' })
    assert.equal(res.status, 500)
  } finally {
    await s.sql`alter table audit_entries drop constraint no_tags_today`
  }
  const tags = await s.admin('GET', `/accounts/${a.id}/tags`)
  assert.deepEqual(
    tags.body.filter((t: { title: string }) => t.title === 'Never'),
    [],
  )
})

test('a refused change is recorded with its status, and nothing of it is kept', async () => {
  const made = await writer.api('/api/v1/segments', { name: 'Germany', filters: [] })
  assert.equal(made.status, 201, JSON.stringify(made.body))
  assert.deepEqual(
    [(await latest()).action, (await latest()).target],
    ['createSegment', `segments/${made.body.id}`],
  )
  // The same name again: 409, after the handler began its transaction.
  const twice = await writer.api('/api/v1/segments', { name: 'Germany', filters: [] })
  assert.equal(twice.status, 409, JSON.stringify(twice.body))
  const refused = await latest()
  assert.deepEqual(
    [refused.action, refused.target, refused.status],
    ['createSegment', 'segments', 409],
  )
  assert.equal((await writer.api('/api/v1/segments', undefined, 'GET')).body.length, 1)
  // Invalid input: 400, before any statement.
  const invalid = await writer.api('/api/v1/customer/acme-1', { name: 7 }, 'PUT')
  assert.equal(invalid.status, 400)
  assert.deepEqual([(await latest()).action, (await latest()).status], ['updateCustomer', 400])
  // The operator naming an account that does not exist: the operator's own log.
  assert.equal((await s.admin('DELETE', '/accounts/999999/keys/1')).status, 404)
  const operator = await s.admin('GET', '/audit?limit=1')
  assert.deepEqual(
    [
      operator.body.entries[0].action,
      operator.body.entries[0].target,
      operator.body.entries[0].status,
    ],
    ['revokeKey', 'accounts/999999/keys/1', 404],
  )
  // No key, a key without the scope, a wrong key: refused before any change is named, no entry.
  const last = (await latest()).id
  assert.equal((await s.call('POST', '/api/v1/segments', { name: 'x', filters: [] })).status, 401)
  assert.equal(
    (await s.api('sk_1_nottherightsecretatall')('/api/v1/segments', { name: 'x' })).status,
    403,
  )
  assert.equal((await aAudit('/api/v1/segments', { name: 'x', filters: [] })).status, 403)
  assert.equal((await latest()).id, last)
})

test('the operator’s changes that name no account have their own log', async () => {
  const started = await s.admin('POST', '/backups')
  assert.equal(started.status, 202, JSON.stringify(started.body))
  const { body } = await s.admin('GET', '/audit?limit=1')
  assert.deepEqual(
    { ...body.entries[0], id: undefined, at: undefined },
    {
      id: undefined,
      at: undefined,
      actor: { type: 'operator', id: null, name: 'operator' },
      action: 'startBackup',
      target: 'backups',
      status: 202,
      address: '127.0.0.1',
    },
  )
  // A new account's creation opens its own log.
  const made = await s.admin('POST', '/accounts', { name: 'Third' })
  const third = await s.admin('GET', `/accounts/${made.body.id}/audit`)
  assert.deepEqual(
    third.body.entries.map((e: any) => [e.action, e.target]),
    [['createAccount', `accounts/${made.body.id}`]],
  )
})

test("one account's key reads its own log only; paging walks it newest first", async () => {
  const mine = await log(bAudit)
  assert.ok(mine.entries.length > 0)
  assert.ok(
    mine.entries.every(
      (e) => !e.target.includes(`accounts/${a.id}/`) && e.action !== 'createCustomer',
    ),
  )
  const theirs = await log(aAudit, '?limit=1000')
  const ids = new Set(theirs.entries.map((e) => e.id))
  assert.ok(
    mine.entries.every((e) => !ids.has(e.id)),
    'no entry of A in B',
  )
  // B's key cannot name A: the account is the key's.
  const viaAdmin = await s.admin('GET', `/accounts/${b.id}/audit?limit=1000`)
  assert.deepEqual(viaAdmin.body.entries, mine.entries)
  // Pages of two, newest first, until the end: the whole log once.
  const walked: number[] = []
  let query = '?limit=2'
  for (;;) {
    const page = await log(aAudit, query)
    walked.push(...page.entries.map((e) => e.id))
    if (!page.paging) break
    query = `?limit=2&after=${page.paging.next.after}`
  }
  assert.deepEqual(
    walked,
    theirs.entries.map((e) => e.id),
  )
  assert.deepEqual(
    walked,
    [...walked].sort((x, y) => y - x),
  )
  for (const bad of ['?limit=0', '?limit=1001', '?after=x']) {
    const res = await aAudit(`/api/v1/audit${bad}`, undefined, 'GET')
    assert.equal(res.status, 400, bad)
    assert.match(res.body.errors[0].path, /^\/query\/(limit|after)$/)
  }
  assert.equal(
    (await a.api('/api/v1/audit', undefined, 'GET')).status,
    403,
    'the default scopes do not read it',
  )
})

test('retention deletes the entries older than SERVICE_AUDIT_RETENTION_DAYS, and only those', async () => {
  const before = (await log(aAudit, '?limit=1000')).entries
  const old = before.slice(-2).map((e) => e.id)
  await s.sql`update audit_entries set at = now() - interval '401 days' where account_id = ${a.id}
    and id = any(${old})`
  await s.sql`update operator_audit_entries set at = now() - interval '401 days'`
  assert.equal(s.app.config.auditRetentionDays, 400)
  const purged = await purgeAudit(s.app)
  assert.equal(purged.entries, 2)
  assert.ok(purged.operator_entries >= 2)
  const left = (await log(aAudit, '?limit=1000')).entries
  assert.deepEqual(
    left.map((e) => e.id),
    before.slice(0, -2).map((e) => e.id),
  )
  assert.deepEqual((await s.admin('GET', '/audit')).body.entries, [])
  assert.deepEqual(await purgeAudit(s.app), { entries: 0, operator_entries: 0 })
})

test('a backup holds the audit log, and its restore brings it back', async () => {
  const file = join(dir, 'audit.backup')
  if (clusterFromEnv()) {
    // On Citus the service refuses to make a backup (docs/operations.md): the nodes are backed up.
    await assert.rejects(backup(s.app.sql, file), /Citus cluster/)
    return
  }
  const entries = await s.sql`select * from audit_entries order by account_id, id`
  const operator = await s.sql`select * from operator_audit_entries order by id`
  assert.ok(entries.length > 10)
  await backup(s.app.sql, file)
  const target = await freshDatabase()
  const sql = connect(target.url, { max: 1 })
  try {
    await restore(sql, target.url, file)
    assert.deepEqual(await sql`select * from audit_entries order by account_id, id`, entries)
    assert.deepEqual(await sql`select * from operator_audit_entries order by id`, operator)
  } finally {
    await sql.end()
    await target.drop()
  }
})
