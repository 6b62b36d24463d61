// The "This week" report (GET /api/v1/insights/week) over fixtures of known movements: each list
// names exactly the customers that moved so, and each number's search lists exactly the customers
// it counts.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'
import { allPages, dayAgo as day, upload } from './helpers/search.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
let acme: Account
let other: Account

// The fixtures' model scores engagement from logins, 0 to 40: 20 logins score 0, 5 score -75, 30 score 50.
const snapshots = (...pairs: [daysAgo: number, logins: number][]) =>
  pairs.map(([n, logins]) => ({ date: day(n), logins }))
const week = async (account: Account, query = '') => {
  const res = await account.api(`/api/v1/insights/week${query}`, undefined, 'GET')
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}
// The report once the refreshes enqueued by earlier writes have run (a refresh waits 1 s).
const settled = async (account: Account, query = '') => {
  for (const started = Date.now(); Date.now() - started < 30_000; ) {
    const r = await week(account, query)
    if (!r.refreshing) return r
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  assert.fail('the report was still refreshing after 30 s')
}
const ids = (list: { customers: { external_id: string }[] }) => list.customers.map((c) => c.external_id)
const searched = async (where: unknown) =>
  (await allPages(acme, 'customers', { where, limit: 1000 })).flatMap((p) => p.results.map((c: any) => c.id)).sort()

before(async () => {
  s = await startTestService({ logLevel: 'error' })
  acme = await scoredAccount(s, 'Acme')
  other = await scoredAccount(s, 'Other')
  const us = { country: 'US', has_sso: true }
  await upload(acme, 'customers', [
    { external_id: 'entered', name: 'Entered', attributes: us, metrics: snapshots([20, 30], [2, 5]) },
    { external_id: 'steady', name: 'Steady', attributes: us, metrics: snapshots([20, 30], [2, 30]) },
    { external_id: 'recovered', name: 'Recovered', attributes: us, metrics: snapshots([20, 5], [1, 35]) },
    { external_id: 'dropped', name: 'Dropped', attributes: us, metrics: snapshots([20, 40], [1, 25]) },
    { external_id: 'churned', name: 'Churned', attributes: us, metrics: snapshots([20, 30], [1, 30]) },
    { external_id: 'back', name: 'Back', attributes: us, metrics: snapshots([20, 30], [1, 30]) },
    { external_id: 'new', name: 'New', attributes: us, metrics: snapshots([1, 2]) },
    {
      external_id: 'renews-soon',
      name: 'Renews soon',
      attributes: { ...us, renewal_date: day(-30) },
      metrics: snapshots([20, 10], [1, 10]),
    },
    {
      external_id: 'renews-later',
      name: 'Renews later',
      attributes: { ...us, renewal_date: day(-60) },
      metrics: snapshots([20, 30], [1, 30]),
    },
    { external_id: 'renews-late', name: 'Renews late', attributes: { ...us, renewal_date: day(-120) }, metrics: [] },
    { external_id: 'unscored', name: 'Unscored', attributes: { country: 'DE' }, metrics: [] },
  ])
  await upload(other, 'customers', [
    { external_id: 'elsewhere', name: 'Elsewhere', attributes: us, metrics: snapshots([20, 30], [2, 5]) },
  ])
  const put = async (id: string, body: object) => {
    const res = await acme.api(`/api/v1/customer/${id}`, body, 'PUT')
    assert.equal(res.status, 200, JSON.stringify(res.body))
  }
  await put('churned', { is_churned: true, churned_date: day(2) })
  // Churned long ago, so only its reactivation (today) falls in the period.
  await put('back', { is_churned: true, churned_date: day(40) })
  await put('back', { is_churned: false })
})

after(() => s?.stop())

test('the last 7 days: exactly the customers that moved, largest move first, with their drivers', async () => {
  const r = await week(acme)
  assert.equal(r.days, 7)
  assert.equal(r.since, day(7))
  assert.equal(r.today, day(0))
  const lists = Object.fromEntries(Object.entries(r.movements).map(([k, v]) => [k, ids(v as any)]))
  assert.deepEqual(lists, {
    entered_risk: ['entered'],
    left_risk: ['recovered'],
    churned: ['churned'],
    reactivated: ['back'],
    drops: ['entered', 'dropped'],
    gains: ['recovered'],
  })
  // Each list's search lists exactly the customers it names; nobody moved, nothing to search.
  for (const [kind, list] of Object.entries(r.movements) as [string, any][]) {
    assert.equal(list.count, list.customers.length, kind)
    assert.deepEqual(await searched(list.search), ids(list).sort(), kind)
  }
  assert.equal((await week(acme, '?days=30')).movements.drops.search, null)
  // external_id is a search field like the others: negated, and a sort key across pages.
  const named = { propertyName: 'external_id', operator: 'NIN', values: ['entered', 'steady'] }
  const pages = await allPages(acme, 'customers', {
    where: named,
    sort: [{ propertyName: 'external_id', direction: 'desc' }],
    limit: 3,
  })
  const listed = pages.flatMap((p) => p.results.map((c: any) => c.id))
  assert.deepEqual(listed, [...listed].sort().reverse())
  assert.ok(listed.length > 3 && !listed.includes('entered') && !listed.includes('steady'))
  const [entered] = r.movements.entered_risk.customers
  assert.deepEqual(
    { ...entered, drivers: undefined },
    {
      external_id: 'entered',
      name: 'Entered',
      engagementscore: -75,
      engagementscore_before: 50,
      fitscore: 100,
      churn_risk: entered.churn_risk,
      date: null,
      drivers: undefined,
    },
  )
  assert.deepEqual(entered.drivers, ['logins'])
  assert.deepEqual(r.movements.gains.customers[0].drivers.sort(), ['country', 'has_sso', 'logins'])
  assert.equal(r.movements.churned.customers[0].date, day(2))
  assert.equal(r.movements.reactivated.customers[0].date, day(0))
})

test('the last 30 days start before any score: churns and reactivations only', async () => {
  const r = await week(acme, '?days=30')
  assert.equal(r.since, day(30))
  assert.deepEqual(Object.fromEntries(Object.entries(r.movements).map(([k, v]) => [k, ids(v as any)])), {
    entered_risk: [],
    left_risk: [],
    churned: ['churned'],
    reactivated: ['back'],
    drops: [],
    gains: [],
  })
  const bad = await acme.api('/api/v1/insights/week?days=14', undefined, 'GET')
  assert.equal(bad.status, 400)
  assert.equal(bad.body.errors[0].path, '/query/days')
})

test('renewals in the next 90 days, unhealthy first, and their searches list the same customers', async () => {
  const { renewals } = await week(acme)
  assert.deepEqual(ids(renewals), ['renews-soon', 'renews-later'])
  assert.equal(renewals.count, 2)
  assert.deepEqual(
    renewals.customers.map((c: any) => [c.renewal_date, c.quadrant, c.engagementscore]),
    [
      [day(-30), 'churn_risk', -50],
      [day(-60), 'upsell', 50],
    ],
  )
  assert.deepEqual(renewals.customers[0].drivers, ['logins'])
  assert.deepEqual(await searched(renewals.search), ['renews-later', 'renews-soon'])
  assert.equal(renewals.at_risk.count, 1)
  assert.deepEqual(await searched(renewals.at_risk.search), ['renews-soon'])
})

test('12 weeks of health: this week counts what its searches list, earlier weeks read the history', async () => {
  const { weeks } = await week(acme)
  assert.equal(weeks.length, 12)
  assert.deepEqual(
    weeks.map((w: any) => w.week_ending),
    Array.from({ length: 12 }, (_, i) => day(7 * (11 - i))),
  )
  const now = weeks[11]
  // Active now: all but churned; in churn risk: entered, new (2 logins) and renews-soon.
  assert.deepEqual(Object.fromEntries(Object.entries(now.quadrants).map(([q, v]: [string, any]) => [q, v.count])), {
    churn_risk: 3,
    upsell: 5,
    engaged_poor_fit: 0,
    not_scored: 2,
  })
  for (const [q, v] of Object.entries(now.quadrants) as [string, any][])
    assert.equal((await searched(v.search)).length, v.count, q)
  assert.deepEqual(await searched(now.quadrants.not_scored.search), ['renews-late', 'unscored'])
  assert.equal(now.median_engagement, 37.5)
  // A week ago: scores of day 20 (churned was active then); new had no score yet, and like the
  // customers never scored it did not exist then.
  const before = weeks[10]
  assert.deepEqual(Object.fromEntries(Object.entries(before.quadrants).map(([q, v]: [string, any]) => [q, v.count])), {
    churn_risk: 2,
    upsell: 6,
    engaged_poor_fit: 0,
    not_scored: 0,
  })
  assert.ok(Object.values(before.quadrants).every((v: any) => v.search === null))
  // Before the first snapshot: nobody.
  assert.ok(Object.values(weeks[0].quadrants).every((v: any) => v.count === 0))
  assert.equal(weeks[0].median_engagement, null)

  // The report is kept, and computed anew in the background after any change of the rows it reads:
  // steady, churned 10 days ago, leaves the upsell customers of a week ago (not of two weeks ago) and
  // of now.
  const first = await settled(acme)
  assert.deepEqual(first.weeks, weeks)
  assert.equal((await week(acme)).computed_at, first.computed_at)
  const kept = await s.sql`select days, moves::text || renewing::text as rows from week_reports
    where account_id = ${acme.id} order by days`
  // Kept without names or external ids, so that an erasure leaves none behind.
  for (const { rows } of kept) assert.ok(!/external_id|"name"|Renews soon/.test(rows), rows)
  assert.deepEqual(
    kept.map((r) => r.days),
    [7, 30],
  )
  const churned = await acme.api('/api/v1/customer/steady', { is_churned: true, churned_date: day(10) }, 'PUT')
  assert.equal(churned.status, 200, JSON.stringify(churned.body))
  // Until its refresh has run, the kept report is served as it was, and says so.
  const stale = await week(acme)
  assert.equal(stale.computed_at, first.computed_at)
  assert.equal(stale.refreshing, true)
  assert.deepEqual(stale.weeks, weeks)
  const refreshed = await settled(acme)
  assert.ok(refreshed.computed_at > first.computed_at)
  const changed = refreshed.weeks
  assert.deepEqual(changed.slice(0, 10), weeks.slice(0, 10))
  assert.equal(changed[10].quadrants.upsell.count, 5)
  assert.equal(changed[11].quadrants.upsell.count, 4)
  assert.deepEqual(ids((await settled(acme, '?days=30')).movements.churned), ['churned', 'steady'])
  // A deletion too: one customer fewer not scored.
  assert.equal((await acme.api('/api/v1/customer/unscored', undefined, 'DELETE')).status, 204)
  assert.equal((await settled(acme)).weeks[11].quadrants.not_scored.count, 1)

  // The daily run computes every kept report anew for the new day.
  const [{ at }] = await s.sql`select max(computed_at) as at from week_reports`
  await s.sql`select graphile_worker.add_job('refresh_week_report', '{}'::json)`
  for (const started = Date.now(); Date.now() - started < 30_000; ) {
    const [row] = await s.sql`select count(*) filter (where computed_at <= ${at})::int as left from week_reports`
    if (row.left === 0) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const left = await s.sql`select account_id, days from week_reports where computed_at <= ${at}`
  assert.deepEqual([...left], [])
})

test('another account sees only its own customers', async () => {
  const r = await week(other)
  assert.deepEqual(ids(r.movements.entered_risk), ['elsewhere'])
  assert.equal(r.renewals.count, 0)
  assert.equal(r.weeks[11].quadrants.churn_risk.count, 1)
})

test('property labels: defined, changed, cleared, listed, and used by explanations and the report', async () => {
  const define = (body: object) => s.admin('POST', `/accounts/${other.id}/properties`, body)
  const relabel = (codename: string, body: object) =>
    s.admin('PATCH', `/accounts/${acme.id}/properties/customer/${codename}`, body)
  const labelled = await define({
    entity: 'customer',
    kind: 'metric',
    codename: 'active_users',
    type: 'number',
    label: 'Active users',
  })
  assert.equal(labelled.status, 201, JSON.stringify(labelled.body))
  assert.equal(labelled.body.label, 'Active users')
  const both = await define({
    entity: 'customer',
    kind: 'metric',
    codename: 'x',
    type: 'number',
    label: 'X',
    name: 'Y',
  })
  assert.equal(both.status, 400)
  assert.equal(both.body.errors[0].path, '/name')
  const empty = await relabel('logins', { label: '' })
  assert.equal(empty.status, 400)
  assert.equal((await relabel('nothing', { label: 'Nothing' })).status, 404)
  assert.equal((await relabel('logins', { label: 'Logins', codename: 'x' })).status, 400)

  const set = await relabel('logins', { label: 'Weekly logins' })
  assert.equal(set.status, 200, JSON.stringify(set.body))
  assert.deepEqual(set.body, {
    entity: 'customer',
    kind: 'metric',
    codename: 'logins',
    type: 'number',
    label: 'Weekly logins',
    name: 'Weekly logins',
    system: false,
  })
  // Listed with it, to the operator and to a key of the account.
  const listed = await acme.api('/api/v1/properties', undefined, 'GET')
  assert.equal(listed.status, 200)
  assert.equal(listed.body.find((p: any) => p.codename === 'logins').label, 'Weekly logins')
  assert.equal(listed.body.find((p: any) => p.codename === 'country').label, null)
  assert.ok(!listed.body.some((p: any) => p.codename === 'active_users'))
  const admin = await s.admin('GET', `/accounts/${acme.id}/properties`)
  assert.equal(admin.body.find((p: any) => p.codename === 'logins').label, 'Weekly logins')

  // The explanation names each rule by its label, else its codename.
  const customer = (await acme.api('/api/v1/customer/entered', undefined, 'GET')).body
  const explanation = customer.score_explanation
  assert.deepEqual(explanation.engagement, [{ codename: 'logins', label: 'Weekly logins', contribution: -75 }])
  assert.deepEqual(explanation.health_drivers.map((d: any) => [d.codename, d.label]).sort(), [
    ['country', 'country'],
    ['has_sso', 'has_sso'],
  ])
  assert.deepEqual((await week(acme)).movements.entered_risk.customers[0].drivers, ['Weekly logins'])

  assert.equal((await relabel('logins', { label: null })).body.label, null)
  assert.deepEqual((await week(acme)).movements.entered_risk.customers[0].drivers, ['logins'])
})

test('refreshes keep their pace: the next starts no sooner than 5 times the last one took', async () => {
  const key = `refresh_week_report:${acme.id}`
  await settled(acme)
  // As if the last refresh had taken an hour: half an hour for each period.
  await s.sql`update week_reports set computed_ms = 1800000 where account_id = ${acme.id}`
  const kept = (await week(acme)).computed_at
  assert.equal((await acme.api('/api/v1/customer/steady', { is_churned: false }, 'PUT')).status, 200)
  // Its refresh runs 1 s later, finds the report not due, and puts itself off by about 5 hours.
  const job = await eventually(async () => {
    const [waiting] = await s.sql`select run_at, locked_at from graphile_worker.jobs where key = ${key}`
    return waiting && !waiting.locked_at && waiting.run_at.getTime() > Date.now() + 4 * 3_600_000 && waiting
  }, 'the refresh put off')
  assert.ok(job.run_at.getTime() < Date.now() + 5 * 3_600_000)
  const r = await week(acme)
  assert.equal(r.computed_at, kept)
  assert.equal(r.refreshing, true)
  await s.sql`delete from graphile_worker._private_jobs where key = ${key}`
})

test('a customer deleted while the kept report still refreshes is left out of it, without an error', async () => {
  const key = `refresh_week_report:${acme.id}`
  // The refresh the deletion enqueues puts itself off (as above): the kept report still names it.
  await s.sql`update week_reports set computed_ms = 1800000 where account_id = ${acme.id}`
  const listedIn = (r: any) => [...Object.values(r.movements).flatMap((m: any) => ids(m)), ...ids(r.renewals)]
  const before = await week(acme)
  assert.ok(listedIn(before).includes('entered'), JSON.stringify(before.movements))
  assert.equal((await acme.api('/api/v1/customer/entered', undefined, 'DELETE')).status, 204)
  const after = await week(acme)
  assert.equal(after.refreshing, true)
  assert.equal(after.computed_at, before.computed_at)
  assert.ok(!listedIn(after).includes('entered'), JSON.stringify(after.movements))
  assert.deepEqual(
    listedIn(after),
    listedIn(before).filter((id) => id !== 'entered'),
  )
  await s.sql`delete from graphile_worker._private_jobs where key = ${key}`
})
