// Every expensive request has a bounded cost (issue 30): IN lists cost one array, the request's
// size is capped, its statements run under a timeout on a pool of their own, and a client that goes
// takes its query with it. A statement is held as long as a test needs by a lock on the table it
// reads (contacts, which a customer's point read never touches).
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { budgeted } from '../src/db/budget.ts'
import { Refusal } from '../src/errors.ts'
import type { SearchBody } from '../src/records/search-body.ts'
import { searchPage } from '../src/records/search.ts'
import { compileSearch } from '../src/search/sql.ts'
import { recomputeSegments } from '../src/segments/members.ts'
import { lockTable as lockTableOf } from './helpers/db.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { search, upload } from './helpers/search.ts'
import { startTestService, type TestService } from './helpers/service.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
let acme: Account
let other: Account

const countries = Array.from({ length: 20 }, (_, i) => `country-${i}`)

before(async () => {
  s = await startTestService({ expensivePerAccount: 30 })
  acme = await scoredAccount(s)
  other = await scoredAccount(s, 'Other')
  const customers = countries.map((country, i) => ({
    external_id: `c-${i}`,
    name: `Customer ${i}`,
    attributes: { country },
    metrics: [{ date: new Date().toISOString().slice(0, 10), logins: i }],
  }))
  await upload(acme, 'customers', customers)
  await upload(other, 'customers', [{ external_id: 'o-1', name: 'Other one' }])
})

after(() => s.stop())

const ids = (res: { status: number; body: any }) => {
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.results.map((r: { id: string }) => r.id).sort()
}

// 1,000 values, among them some that need quoting in an array literal, and the two wanted.
const thousand = (wanted: string[]) => [
  ...wanted,
  'a"b',
  'x\\y',
  '{,}',
  ...Array.from({ length: 1000 - wanted.length - 3 }, (_, i) => `nobody-${i}`),
]

describe('IN on a custom property', () => {
  test('an attribute IN and NIN of 1,000 values answer as the list says', async () => {
    const values = thousand(['country-3', 'country-17'])
    assert.equal(values.length, 1000)
    const inList = await search(acme, 'customers', {
      filters: [{ propertyName: 'country', operator: 'IN', values }],
    })
    assert.deepEqual(ids(inList), ['c-17', 'c-3'])
    const notIn = await search(acme, 'customers', {
      filters: [{ propertyName: 'country', operator: 'NIN', values }],
    })
    assert.equal(ids(notIn).length, 18)
    const metric = Array.from({ length: 1000 }, (_, i) => String(i * 7))
    const logins = await search(acme, 'customers', {
      filters: [{ propertyName: 'logins', operator: 'IN', values: metric }],
    })
    assert.deepEqual(ids(logins), ['c-0', 'c-14', 'c-7'])
  })

  test('a 1,000-value IN plans as one array test, with one parameter for the list', async () => {
    const query = compileSearch({
      entity: 'customer',
      accountId: acme.id,
      catalog: [{ codename: 'country', kind: 'attribute', type: 'string' }],
      filters: [{ propertyName: 'country', operator: 'IN', values: thousand(['country-3']) }],
      limit: 10,
      today: new Date().toISOString().slice(0, 10),
    })
    assert.ok(query.params.length < 10, `${query.params.length} parameters`)
    const [row] = await s.sql.unsafe(
      `explain (format json) ${query.text}`,
      query.params as string[],
    )
    const plan = JSON.stringify(row['QUERY PLAN'])
    assert.match(plan, /= ANY/)
    assert.doesNotMatch(plan, / OR /)
    assert.doesNotMatch(plan, /BitmapOr/)
  })
})

describe('caps on what a request asks', () => {
  const leaf = (n: number) => ({
    propertyName: 'country',
    operator: 'IN',
    values: thousand([`x-${n}`]),
  })
  const errors = (res: { status: number; body: any }) => {
    assert.equal(res.status, 400, JSON.stringify(res.body))
    return res.body.errors as { path: string; message: string }[]
  }

  test('at most 5,000 values across a where tree, and across filters', async () => {
    const tree = await search(acme, 'customers', { where: { or: [1, 2, 3, 4, 5, 6].map(leaf) } })
    assert.deepEqual(
      errors(tree).map((e) => e.path),
      ['/where'],
    )
    assert.match(errors(tree)[0].message, /5000 values/)
    const filters = await search(acme, 'customers', { filters: [1, 2, 3, 4, 5, 6].map(leaf) })
    assert.deepEqual(
      errors(filters).map((e) => e.path),
      ['/filters'],
    )
    const five = await search(acme, 'customers', { where: { or: [1, 2, 3, 4, 5].map(leaf) } })
    assert.deepEqual(ids(five), [])
  })

  test('a LIKE value of at most 256 characters', async () => {
    const like = (value: string) =>
      search(acme, 'customers', { filters: [{ propertyName: 'name', operator: 'NLIKE', value }] })
    assert.deepEqual(
      errors(await like('x'.repeat(257))).map((e) => e.path),
      ['/filters/0/value'],
    )
    assert.equal(ids(await like('x'.repeat(256))).length, 20)
  })

  test('an aggregate of at most 1,000 fields x buckets, the grid included', async () => {
    for (const codename of ['m1', 'm2', 'm3'])
      await s.admin('POST', `/accounts/${acme.id}/properties`, {
        entity: 'customer',
        kind: 'metric',
        codename,
        type: 'number',
      })
    const core = [
      'fitscore',
      'engagementscore',
      'engagementscore_difference',
      'churn_risk',
      'upsell_score',
    ]
    const fields = [...core, 'logins', 'seats', 'm1', 'm2', 'm3']
    const wide = await acme.api('/api/v1/customers/aggregate', {
      fields,
      buckets: 100,
      matrix: 'grid',
    })
    assert.deepEqual(
      errors(wide).map((e) => e.path),
      ['/buckets'],
    )
    const fits = await acme.api('/api/v1/customers/aggregate', {
      fields,
      buckets: 90,
      matrix: 'grid',
    })
    assert.equal(fits.status, 200, JSON.stringify(fits.body))
  })
})

const lockTable = (table: 'contacts' | 'customers') => lockTableOf(s.sql, table)
const lockContacts = () => lockTable('contacts')

// The backends running a statement over contacts for a search (not this test's own queries).
const waiting = async () =>
  (
    await s.sql`select pid from pg_stat_activity
      where state = 'active' and query like '%from contacts r%' and pid <> pg_backend_pid()`
  ).length

const until = async (check: () => Promise<boolean>) => {
  for (;;) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('budgets', () => {
  test('a search over its statement timeout is a 422 naming the budget', async () => {
    const release = await lockContacts()
    const saved = s.app.config.searchTimeoutMs
    s.app.config.searchTimeoutMs = 200
    try {
      const res = await search(acme, 'contacts', {
        filters: [{ propertyName: 'name', operator: 'KNOWN' }],
      })
      assert.equal(res.status, 422, JSON.stringify(res.body))
      assert.equal(res.headers.get('content-type'), 'application/problem+json')
      assert.match(res.body.detail, /search budget of 200 ms/)
      assert.match(res.body.detail, /estimate/)
    } finally {
      s.app.config.searchTimeoutMs = saved
      await release()
    }
    assert.equal((await search(acme, 'contacts', {})).status, 200)
  })

  test("the time a request waited for its account's turn counts against its budget", async () => {
    const release = await lockTable('customers')
    // Given back after 2 s: within the whole budget (5 s), past what is left of it after the wait.
    const unlocking = new Promise((done) => setTimeout(done, 2000)).then(release)
    const waitedMs = s.app.config.searchTimeoutMs - 100
    await assert.rejects(
      searchPage(s.app, acme.id, 'customer', { limit: 10 } as SearchBody, { waitedMs }),
      (err) => err instanceof Refusal && err.status === 422,
    )
    await unlocking
  })

  test("a segment's member search and its recomputation run under their budgets too", async () => {
    const created = await acme.api('/api/v1/segments', {
      name: 'Some countries',
      filters: [{ propertyName: 'country', operator: 'IN', values: ['country-1', 'country-2'] }],
    })
    assert.equal(created.status, 201, JSON.stringify(created.body))
    const release = await lockTable('customers')
    const saved = { ...s.app.config }
    s.app.config.searchTimeoutMs = 100
    s.app.config.segmentTimeoutMs = 100
    try {
      const res = await acme.api(`/api/v1/segments/${created.body.id}/search`, {})
      assert.equal(res.status, 422, JSON.stringify(res.body))
      assert.match(res.body.detail, /search budget of 100 ms/)
      // The segment is skipped (its members stay as they were), not the job failed on every retry.
      const [before] = await s.app
        .sql`select computed_at from segments where id = ${created.body.id}`
      await recomputeSegments(s.app, { account_id: acme.id })
      const [after] = await s.app
        .sql`select computed_at from segments where id = ${created.body.id}`
      assert.deepEqual(after.computed_at, before.computed_at)
    } finally {
      Object.assign(s.app.config, saved)
      await release()
    }
    const members = await acme.api(`/api/v1/segments/${created.body.id}/search`, {})
    assert.deepEqual(ids(members), ['c-1', 'c-2'])
  })

  test('a segment saved before a limit it is past is skipped by the recomputation, which goes on', async () => {
    const values = Array.from({ length: 6000 }, (_, i) => `country-${i}`)
    const [old] = await s.app.sql`insert into segments (account_id, name, body)
      values (${acme.id}, 'Saved before the value cap', ${s.app.sql.json({
        filters: [{ propertyName: 'country', operator: 'IN', values }],
      })}) returning id`
    const created = await acme.api('/api/v1/segments', {
      name: 'After it',
      filters: [{ propertyName: 'country', operator: 'EQ', value: 'country-1' }],
    })
    assert.equal(created.status, 201, JSON.stringify(created.body))
    await s.app.sql`update segments set computed_at = null where id = ${created.body.id}`
    await recomputeSegments(s.app, { account_id: acme.id })
    const rows = await s.app
      .sql`select id, computed_at from segments where id in (${old.id}, ${created.body.id})`
    const computed = new Map(rows.map((r) => [r.id, r.computed_at]))
    assert.equal(computed.get(old.id), null)
    assert.notEqual(computed.get(created.body.id), null)
    await s.app.sql`delete from segments where id = ${old.id}`
  })

  test('an aggregate over its statement timeout is a 422 too', async () => {
    const saved = s.app.config.aggregateTimeoutMs
    s.app.config.aggregateTimeoutMs = 1
    const release = await lockTable('customers')
    try {
      const res = await acme.api('/api/v1/customers/aggregate', { fields: ['logins'] })
      assert.equal(res.status, 422, JSON.stringify(res.body))
      assert.match(res.body.detail, /aggregate budget of 1 ms/)
    } finally {
      s.app.config.aggregateTimeoutMs = saved
      await release()
    }
  })

  test('a client that hangs up takes its query with it: the backend is idle within 1 s', async () => {
    const release = await lockContacts()
    try {
      const body = JSON.stringify({ filters: [{ propertyName: 'name', operator: 'KNOWN' }] })
      const req = request(`${s.base}/api/v1/contacts/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'service-key': acme.token },
      })
      req.on('error', () => {})
      req.end(body)
      await until(async () => (await waiting()) === 1)
      req.destroy()
      const gone = Date.now()
      await until(async () => (await waiting()) === 0 || Date.now() - gone > 1000)
      assert.equal(await waiting(), 0, 'the search still runs 1 s after its client went')
    } finally {
      await release()
    }
  })

  // The account's share of expensive requests is lifted above both pools (the service
  // starts with 30).
  test("a point read of another account answers while one account's searches fill the expensive pool", async () => {
    const release = await lockContacts()
    const size = s.app.config.heavyPoolSize
    let settled = 0
    // More searches than either pool holds (the API pool has 20): in one shared pool they would
    // take every connection, and the point read would wait for the lock as they do.
    const slow = Array.from({ length: 22 }, () =>
      search(acme, 'contacts', {}).finally(() => settled++),
    )
    try {
      await until(async () => (await waiting()) === size)
      const read = await other.api('/api/v1/customer/o-1', undefined, 'GET')
      assert.equal(read.status, 200, JSON.stringify(read.body))
      assert.equal(read.body.id, 'o-1')
      assert.equal(settled, 0, 'the searches were still waiting when the point read answered')
      assert.equal(await waiting(), size)
    } finally {
      await release()
    }
    for (const res of await Promise.all(slow))
      assert.equal(res.status, 200, JSON.stringify(res.body))
  })
})

test('a client gone between two statements of a budget ends its transaction: no statement is left unsent', async () => {
  const client = new AbortController()
  let pid = 0
  const work = budgeted(s.app, { signal: client.signal }, 'aggregate', async (tx, track) => {
    ;[{ pid }] = await track(tx`select pg_advisory_xact_lock(4242), pg_backend_pid() as pid`)
    client.abort()
    return track(tx`select 1`)
  })
  const hung = delay(10_000, 'still open after 10 s', { ref: false })
  await assert.rejects(
    Promise.race([work, hung]),
    (err: Refusal) => err instanceof Refusal && err.status === 499,
  )
  // Rolled back: the lock is free and its session does not idle in a transaction (other sessions,
  // the worker's, may be between two statements of theirs at this moment).
  assert.ok(pid > 0)
  const [row] = await s.app
    .sql`select pg_try_advisory_xact_lock(4242) as free, (select count(*)::int
    from pg_stat_activity where pid = ${pid} and state like 'idle in transaction%') as idle`
  assert.deepEqual({ ...row }, { free: true, idle: 0 })
})
