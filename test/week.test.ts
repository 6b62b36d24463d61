// The "This week" report (GET /api/v1/insights/week) over fixtures of known movements: each list
// names exactly the customers that moved so (the learned churn probability's rises too), and each
// number's search lists exactly the customers it counts (also when more moved than are listed). A
// report kept from an earlier day is served as it is while its refresh runs, and a refresh keeps
// every period.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'
import { allPages, dayAgo as day, search, upload } from './helpers/search.ts'
import { scoreDaily } from '../src/scoring/daily.ts'
import { CHURN_DEFS, generate } from './helpers/churn-data.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
let acme: Account
let other: Account

// The fixtures' model scores engagement from logins, 0 to 40: 20 logins score 0, 5 score -75, 30
// score 50.
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
const ids = (list: { customers: { external_id: string }[] }) =>
  list.customers.map((c) => c.external_id)
const searched = async (where: unknown, account = acme) =>
  (await allPages(account, 'customers', { where, limit: 1000 }))
    .flatMap((p) => p.results.map((c: any) => c.id))
    .sort()
const total = async (account: Account, where: unknown) => {
  const res = await search(account, 'customers', { where, count: 'exact', limit: 1 })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.total
}
const field = (propertyName: string, operator: string, value?: string | number) => ({
  propertyName,
  operator,
  ...(value !== undefined && { value: String(value) }),
})
const named = (id: string) => field('external_id', 'EQ', id)

before(async () => {
  s = await startTestService({ logLevel: 'error' })
  acme = await scoredAccount(s, 'Acme')
  other = await scoredAccount(s, 'Other')
  const us = { country: 'US', has_sso: true }
  await upload(acme, 'customers', [
    {
      external_id: 'entered',
      name: 'Entered',
      attributes: us,
      metrics: snapshots([20, 30], [2, 5]),
    },
    {
      external_id: 'steady',
      name: 'Steady',
      attributes: us,
      metrics: snapshots([20, 30], [2, 30]),
    },
    {
      external_id: 'recovered',
      name: 'Recovered',
      attributes: us,
      metrics: snapshots([20, 5], [1, 35]),
    },
    {
      external_id: 'dropped',
      name: 'Dropped',
      attributes: us,
      metrics: snapshots([20, 40], [1, 25]),
    },
    {
      external_id: 'churned',
      name: 'Churned',
      attributes: us,
      metrics: snapshots([20, 30], [1, 30]),
    },
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
    {
      external_id: 'renews-late',
      name: 'Renews late',
      attributes: { ...us, renewal_date: day(-120) },
      metrics: [],
    },
    { external_id: 'unscored', name: 'Unscored', attributes: { country: 'DE' }, metrics: [] },
  ])
  await upload(other, 'customers', [
    {
      external_id: 'elsewhere',
      name: 'Elsewhere',
      attributes: us,
      metrics: snapshots([20, 30], [2, 5]),
    },
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
  assert.deepEqual(
    Object.fromEntries(Object.entries(r.movements).map(([k, v]) => [k, ids(v as any)])),
    {
      entered_risk: [],
      left_risk: [],
      churned: ['churned'],
      reactivated: ['back'],
      drops: [],
      gains: [],
    },
  )
  const bad = await acme.api('/api/v1/insights/week?days=14', undefined, 'GET')
  assert.equal(bad.status, 400)
  assert.equal(bad.body.errors[0].path, '/query/days')
  // Only the canonical spelling is 7: these are refused naming days and its two values.
  for (const days of ['7.0', '07', '+7', '7e0', '30.', ' 7', '-0']) {
    const res = await acme.api(
      `/api/v1/insights/week?days=${encodeURIComponent(days)}`,
      undefined,
      'GET',
    )
    assert.equal(res.status, 400, days)
    assert.deepEqual(res.body.errors, [{ path: '/query/days', message: 'Must be 7 or 30.' }], days)
  }
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
  assert.deepEqual(
    Object.fromEntries(Object.entries(now.quadrants).map(([q, v]: [string, any]) => [q, v.count])),
    {
      churn_risk: 3,
      upsell: 5,
      engaged_poor_fit: 0,
      not_scored: 2,
    },
  )
  for (const [q, v] of Object.entries(now.quadrants) as [string, any][])
    assert.equal((await searched(v.search)).length, v.count, q)
  assert.deepEqual(await searched(now.quadrants.not_scored.search), ['renews-late', 'unscored'])
  assert.equal(now.median_engagement, 37.5)
  // A week ago: scores of day 20 (churned was active then); new had no score yet, and like the
  // customers never scored it did not exist then.
  const before = weeks[10]
  assert.deepEqual(
    Object.fromEntries(
      Object.entries(before.quadrants).map(([q, v]: [string, any]) => [q, v.count]),
    ),
    {
      churn_risk: 2,
      upsell: 6,
      engaged_poor_fit: 0,
      not_scored: 0,
    },
  )
  assert.ok(Object.values(before.quadrants).every((v: any) => v.search === null))
  // Before the first snapshot: nobody.
  assert.ok(Object.values(weeks[0].quadrants).every((v: any) => v.count === 0))
  assert.equal(weeks[0].median_engagement, null)

  // The report is kept, and computed anew in the background after any change of the rows it reads:
  // steady, churned 10 days ago, leaves the upsell customers of a week ago (not of two weeks ago)
  // and of now.
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
  const churned = await acme.api(
    '/api/v1/customer/steady',
    { is_churned: true, churned_date: day(10) },
    'PUT',
  )
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

  // The daily run computes every kept report anew for the new day. Read across the accounts on the
  // admin pool, whose statements may touch every shard.
  const [{ at }] = await s.app.admin`select max(computed_at) as at from week_reports`
  await s.sql`select graphile_worker.add_job('refresh_week_report', '{}'::json)`
  for (const started = Date.now(); Date.now() - started < 30_000; ) {
    const [row] = await s.app
      .admin`select count(*) filter (where computed_at <= ${at})::int as left from week_reports`
    if (row.left === 0) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const left = await s.app
    .admin`select account_id, days from week_reports where computed_at <= ${at}`
  assert.deepEqual([...left], [])
})

test('the search fields of the movements: past engagement, its change, churn and reactivation dates', async () => {
  // entered: 50 as of day 20 (so 7 days ago), -75 since day 2; no score 30 days ago. new: first
  // scored yesterday. churned: on day 2; back: churned on day 40, reactivated today.
  const only = async (id: string, ...conditions: object[]) =>
    assert.deepEqual(
      await searched({ and: [named(id), ...conditions] }),
      [id],
      JSON.stringify(conditions),
    )
  await only(
    'entered',
    field('engagementscore_7d_ago', 'EQ', 50),
    field('engagementscore_change_7d', 'EQ', -125),
  )
  await only(
    'entered',
    field('engagementscore_30d_ago', 'UNKNOWN'),
    field('engagementscore_change_30d', 'UNKNOWN'),
  )
  await only(
    'new',
    field('engagementscore_7d_ago', 'UNKNOWN'),
    field('engagementscore_change_7d', 'UNKNOWN'),
  )
  await only(
    'recovered',
    field('engagementscore_change_7d', 'GT', 100),
    field('engagementscore_7d_ago', 'LT', 0),
  )
  const churned = field('is_churned', 'EQ', 'true')
  await only(
    'churned',
    churned,
    field('churned_date', 'EQ', day(2)),
    field('reactivated_date', 'UNKNOWN'),
  )
  // LTD N is (today - N, today]: the report's window (since, today].
  await only('churned', churned, field('churned_date', 'LTD', 3))
  assert.deepEqual(await searched({ and: [churned, field('churned_date', 'LTD', 2)] }), [])
  await only('back', field('reactivated_date', 'EQ', day(0)), field('churned_date', 'UNKNOWN'))
  await only('back', field('reactivated_date', 'LTD', 1))
  await only('entered', field('reactivated_date', 'UNKNOWN'))
  // Sortable like any number field.
  const sorted = await allPages(acme, 'customers', {
    where: field('engagementscore_change_7d', 'KNOWN'),
    sort: [{ propertyName: 'engagementscore_change_7d' }],
  })
  assert.deepEqual(sorted.flatMap((p) => p.results.map((c: any) => c.id)).slice(0, 2), [
    'entered',
    'dropped',
  ])
  // Customer-only, and typed.
  const contacts = await search(acme, 'contacts', { filters: [field('reactivated_date', 'KNOWN')] })
  assert.equal(contacts.status, 400)
  assert.match(contacts.body.errors[0].message, /customer-only/)
  const typed = await search(acme, 'customers', {
    filters: [field('engagementscore_30d_ago', 'LTD', 3)],
  })
  assert.equal(typed.status, 400, JSON.stringify(typed.body))
  // Answered in `properties` when named there, beside the custom values named (null where unknown);
  // a contact has none of them.
  const shown = await search(acme, 'customers', {
    where: named('entered'),
    properties: [
      'engagementscore_7d_ago',
      'engagementscore_change_7d',
      'engagementscore_30d_ago',
      'country',
    ],
  })
  assert.equal(shown.status, 200, JSON.stringify(shown.body))
  assert.deepEqual(shown.body.results[0].properties, {
    engagementscore_7d_ago: 50,
    engagementscore_change_7d: -125,
    engagementscore_30d_ago: null,
    country: 'US',
  })
  const notContacts = await search(acme, 'contacts', { properties: ['engagementscore_7d_ago'] })
  assert.equal(notContacts.status, 400, JSON.stringify(notContacts.body))
  assert.equal(notContacts.body.errors[0].path, '/properties/0')
})

test('more movers than listed: each count is the total of its search, and the listed are among them', async () => {
  const many = await scoredAccount(s, 'Many')
  const us = { country: 'US', has_sso: true }
  const customers = (prefix: string, n: number, from: number, to: number) =>
    Array.from({ length: n }, (_, i) => ({
      external_id: `${prefix}-${String(i).padStart(2, '0')}`,
      name: `${prefix} ${i}`,
      attributes: us,
      metrics: snapshots([20, from + i], [2, to]),
    }))
  // 14 fall into churn risk (and drop), 12 rise out of it (and gain), 3 drop while healthy, 12
  // churn.
  await upload(many, 'customers', [
    ...customers('enter', 14, 25, 5),
    ...customers('leave', 12, 2, 35),
    ...customers('slip', 3, 38, 30),
    ...customers('quit', 12, 30, 30),
  ])
  for (let i = 0; i < 12; i++) {
    const id = `quit-${String(i).padStart(2, '0')}`
    const res = await many.api(
      `/api/v1/customer/${id}`,
      { is_churned: true, churned_date: day(1 + (i % 5)) },
      'PUT',
    )
    assert.equal(res.status, 200, JSON.stringify(res.body))
  }
  const r = await settled(many)
  const counts = Object.fromEntries(
    Object.entries(r.movements).map(([k, v]: [string, any]) => [k, v.count]),
  )
  assert.deepEqual(counts, {
    entered_risk: 14,
    left_risk: 12,
    churned: 12,
    reactivated: 0,
    drops: 17,
    gains: 12,
  })
  for (const [kind, list] of Object.entries(r.movements) as [string, any][]) {
    if (list.count === 0) {
      assert.equal(list.search, null, kind)
      continue
    }
    assert.equal(list.customers.length, 10, kind)
    assert.equal(await total(many, list.search), list.count, kind)
    const all = await searched(list.search, many)
    assert.equal(all.length, list.count, kind)
    assert.ok(
      ids(list).every((id) => all.includes(id)),
      kind,
    )
  }
  // The 30 days start before any score: only the churns move, and their search says so.
  const month = await week(many, '?days=30')
  assert.equal(month.movements.churned.count, 12)
  assert.equal(await total(many, month.movements.churned.search), 12)
  assert.equal(month.movements.drops.search, null)
})

test('a report kept from an earlier day is answered as of that day while its refresh runs', async () => {
  const fresh = await settled(acme)
  // As if the daily refresh had not run yet since midnight.
  await s.sql`update week_reports set day = day - 1 where account_id = ${acme.id}`
  const stale = await week(acme)
  assert.equal(stale.today, day(1))
  assert.equal(stale.since, day(8))
  assert.deepEqual([stale.renewals.from, stale.renewals.to], [day(1), day(-89)])
  assert.equal(stale.weeks[11].week_ending, day(1))
  assert.equal(stale.computed_at, fresh.computed_at)
  assert.equal(stale.refreshing, true)
  assert.deepEqual(stale.movements.entered_risk.customers, fresh.movements.entered_risk.customers)
  // Its movers are that day's, which no search of today's fields selects.
  assert.ok(Object.values(stale.movements).every((m: any) => m.search === null))
  // No write and no daily run: the request queued the refresh itself (which may have run already).
  const [{ queued }] = await s.sql`select exists (select 1 from graphile_worker.jobs
      where key = ${`refresh_week_report:${acme.id}`}) or exists (select 1 from week_reports
      where account_id = ${acme.id} and day = ${day(0)}::date) as queued`
  assert.ok(queued)
  const refreshed = await settled(acme)
  assert.equal(refreshed.today, day(0))
  assert.ok(refreshed.computed_at > fresh.computed_at)
  assert.deepEqual(refreshed.movements.entered_risk.search, fresh.movements.entered_risk.search)
  const kept = await s.sql`select days from week_reports where account_id = ${acme.id}
      and day = ${day(0)}::date`
  assert.equal(kept.length, 2)
})

test("a period's first request computes it, and its refresh keeps the other period", async () => {
  const lone = await scoredAccount(s, 'Lone')
  // 50 from day 40 (so 30 days ago), -75 since day 2.
  const metrics = snapshots([40, 30], [2, 5])
  await upload(lone, 'customers', [
    { external_id: 'one', name: 'One', attributes: { country: 'US' }, metrics },
  ])
  const periods = async () =>
    (await s.sql`select days from week_reports where account_id = ${lone.id} order by days`).map(
      (r) => r.days,
    )
  assert.deepEqual(await periods(), [])
  assert.equal((await week(lone)).refreshing, true)
  // Kept by the refresh the first request queued: no request asked for the 30 days yet.
  await eventually(async () => (await periods()).length === 2, 'the 30 days kept')
  const [kept] =
    await s.sql`select computed_at from week_reports where account_id = ${lone.id} and days = 30`
  const month = await week(lone, '?days=30')
  assert.equal(month.computed_at, kept.computed_at.toISOString())
  assert.deepEqual(ids(month.movements.entered_risk), ['one'])
  assert.deepEqual(await searched(month.movements.entered_risk.search, lone), ['one'])
  const past = [
    field('engagementscore_30d_ago', 'EQ', 50),
    field('engagementscore_change_30d', 'EQ', -125),
  ]
  assert.deepEqual(await searched({ and: past }, lone), ['one'])
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
  assert.deepEqual(explanation.engagement, [
    { codename: 'logins', label: 'Weekly logins', contribution: -75 },
  ])
  assert.deepEqual(explanation.health_drivers.map((d: any) => [d.codename, d.label]).sort(), [
    ['country', 'country'],
    ['has_sso', 'has_sso'],
  ])
  assert.deepEqual((await week(acme)).movements.entered_risk.customers[0].drivers, [
    'Weekly logins',
  ])

  assert.equal((await relabel('logins', { label: null })).body.label, null)
  assert.deepEqual((await week(acme)).movements.entered_risk.customers[0].drivers, ['logins'])
})

test('refreshes keep their pace: the next starts no sooner than 5 times the last one took', async () => {
  const key = `refresh_week_report:${acme.id}`
  await settled(acme)
  // As if the last refresh had taken an hour: half an hour for each period.
  await s.sql`update week_reports set computed_ms = 1800000 where account_id = ${acme.id}`
  const kept = (await week(acme)).computed_at
  assert.equal(
    (await acme.api('/api/v1/customer/steady', { is_churned: false }, 'PUT')).status,
    200,
  )
  // Its refresh runs 1 s later, finds the report not due, and puts itself off by about 5 hours.
  const job = await eventually(async () => {
    const [waiting] =
      await s.sql`select run_at, locked_at from graphile_worker.jobs where key = ${key}`
    return (
      waiting &&
      !waiting.locked_at &&
      waiting.run_at.getTime() > Date.now() + 4 * 3_600_000 &&
      waiting
    )
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
  const listedIn = (r: any) => [
    ...Object.values(r.movements).flatMap((m: any) => ids(m)),
    ...ids(r.renewals),
  ]
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

// sql/042's triggers queued the refresh and sql/036's kept the churn events; since sql/047 the
// writers do both (docs/design.md, "The This week report's refresh"): here the daily inactive churn
// and its lift by the scoring of a new snapshot, on an account of its own so that the other tests
// keep theirs.
test('the daily inactive churn and its lift at scoring refresh the report and keep their churn events', async () => {
  const before = await settled(other)
  assert.deepEqual(ids(before.movements.churned), [])
  const model = await s.admin('PUT', `/accounts/${other.id}/scoring`, {
    customer: {
      engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }],
      fit: [{ codename: 'country', weight: 100, values: { US: 100 }, default: -100 }],
    },
    churn: { inactive_days: 1 },
  })
  assert.equal(model.status, 200, JSON.stringify(model.body))
  // 'elsewhere' was last seen 2 days ago.
  assert.equal(await scoreDaily(s.app.sql, other.id), 1)
  const churned = await settled(other)
  assert.deepEqual(ids(churned.movements.churned), ['elsewhere'])
  assert.equal(churned.movements.churned.customers[0].date, day(0))
  assert.ok(churned.computed_at > before.computed_at)
  await upload(other, 'customers', [
    { external_id: 'elsewhere', name: 'Elsewhere', metrics: snapshots([0, 30]) },
  ])
  const lifted = await settled(other)
  assert.deepEqual(ids(lifted.movements.churned), [])
  assert.deepEqual(ids(lifted.movements.reactivated), ['elsewhere'])
  const events = await s.sql`
    select e.churned, to_char(e.day, 'YYYY-MM-DD') as day, e.reason from customer_churn_events e
    join customers c on c.account_id = e.account_id and c.service_id = e.customer_id
    where e.account_id = ${other.id} and c.external_id = 'elsewhere' order by e.id`
  assert.deepEqual(
    events.map((e) => ({ ...e })),
    [
      { churned: true, day: day(0), reason: 'inactive' },
      { churned: false, day: day(0), reason: 'inactive' },
    ],
  )
})

// The learned churn probability's rises: an account trained on generated customers (a linear
// signal: less spend, a lower NPS and more seats raise the odds of churn), whose probabilities are
// then taken as written 10 days ago (the history's one entry, moved back), before a few customers
// change.
test('the churn probability rises: the largest rises since the period began, with their drivers', async () => {
  const learned = await s.account('Learned')
  for (const d of CHURN_DEFS)
    assert.equal(
      (await s.admin('POST', `/accounts/${learned.id}/properties`, { entity: 'customer', ...d }))
        .status,
      201,
    )
  const rules = {
    customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] },
  }
  assert.equal((await s.admin('PUT', `/accounts/${learned.id}/scoring`, rules)).status, 200)
  const generated = generate(400, 'linear', 5, day(0))
  await upload(
    learned,
    'customers',
    generated.map((c) => ({
      external_id: `g${c.id}`,
      name: `G ${c.id}`,
      attributes: c.attributes,
      metrics: c.snapshots.map((x) => ({ date: x.date, ...x.values })),
    })),
  )
  const churned = generated.filter((c) => c.churned)
  await s.sql`
    update customers c set is_churned = true, churned_date = u.d, churn_reason = 'manual'
    from unnest(${churned.map((c) => `g${c.id}`)}::text[],
      ${churned.map((c) => c.churnedDate!)}::date[]) u(id, d)
    where c.account_id = ${learned.id} and c.external_id = u.id`
  assert.equal((await learned.api('/api/v1/churn-model/train', {})).status, 202)
  for (const started = Date.now(); ; await new Promise((resolve) => setTimeout(resolve, 200))) {
    const model = (await learned.api('/api/v1/churn-model', undefined, 'GET')).body
    if (model.status === 'ready') break
    assert.equal(model.status, 'training', JSON.stringify(model))
    assert.ok(Date.now() - started < 120_000, 'the training did not end')
  }
  const probability = async () =>
    new Map(
      (
        await allPages(learned, 'customers', {
          where: field('is_churned', 'EQ', 'false'),
          limit: 1000,
        })
      )
        .flatMap((p) => p.results)
        .map((c: any) => [c.id as string, c.churn_probability as number]),
    )
  const trained = await probability()
  // Four active customers of middling probability: three whose odds of churn go up by different
  // amounts, one whose odds go down; then one of the risers churns.
  const middling = [...trained].filter(([, p]) => p > 0.2 && p < 0.6).map(([id]) => id)
  assert.ok(middling.length >= 5, `${middling.length} customers of middling probability`)
  const [most, more, some, falls, leaves] = middling
  const scoredTenDaysAgo = await s.sql`
    update customer_scores set churn_history_dates = array[${day(10)}::date]
    where account_id = ${learned.id} and churn_history_dates = array[${day(0)}::date] returning 1`
  assert.equal(scoredTenDaysAgo.count, 400)
  const was = (id: string) =>
    generated.find((c) => `g${c.id}` === id)!.attributes as Record<string, number>
  const item = (id: string) => ({ external_id: id, name: `G ${id.slice(1)}` })
  await upload(learned, 'customers', [
    { ...item(most), attributes: { spend: 0, nps: -9, seats: 100 } },
    {
      ...item(more),
      attributes: { spend: Math.max(0, was(more).spend - 300), nps: was(more).nps - 4 },
    },
    {
      ...item(some),
      attributes: { spend: Math.max(0, was(some).spend - 100), nps: was(some).nps - 2 },
    },
    { ...item(falls), attributes: { spend: 1000, nps: 9, seats: 1 } },
    { ...item(leaves), attributes: { spend: 0, nps: -9, seats: 100 } },
    // First scored today: no probability on the period's first day, so no rise.
    { external_id: 'fresh', name: 'Fresh', attributes: { spend: 0, nps: -9, seats: 100 } },
  ])
  const put = await learned.api(
    `/api/v1/customer/${leaves}`,
    { is_churned: true, churned_date: day(0) },
    'PUT',
  )
  assert.equal(put.status, 200, JSON.stringify(put.body))
  const now = await probability()
  assert.ok(now.get('fresh')! > 0.5)
  assert.ok(now.get(falls)! < trained.get(falls)!)
  const rise = (id: string) => now.get(id)! - trained.get(id)!
  const risers = [most, more, some].sort((a, b) => rise(b) - rise(a))
  assert.ok(
    risers.every((id) => rise(id) >= 0.01),
    JSON.stringify(risers.map(rise)),
  )

  const { churn_probability_rises: rises } = await settled(learned)
  assert.deepEqual(ids(rises), risers)
  assert.equal(rises.count, 3)
  for (const listed of rises.customers) {
    const read = (await learned.api(`/api/v1/customer/${listed.external_id}`, undefined, 'GET'))
      .body
    assert.deepEqual(listed, {
      external_id: listed.external_id,
      name: read.name,
      churn_probability: now.get(listed.external_id),
      churn_probability_before: trained.get(listed.external_id),
      drivers: read.churn_drivers.up.map((d: { label: string }) => d.label),
    })
  }
  // The history holds the day each probability was written on: 10 days ago, then today's change.
  const [history] = await s.sql`
    select array(select to_char(d, 'YYYY-MM-DD') from unnest(h.churn_history_dates) d) as dates,
    h.churn_history
    from customer_scores h join customers c on c.account_id = h.account_id
      and c.service_id = h.customer_id
    where h.account_id = ${learned.id} and c.external_id = ${most}`
  assert.deepEqual(
    { ...history },
    { dates: [day(10), day(0)], churn_history: [trained.get(most), now.get(most)] },
  )
  // The 30 days begin before the first probability was written: nobody has one to rise from.
  assert.deepEqual((await settled(learned, '?days=30')).churn_probability_rises, {
    count: 0,
    customers: [],
  })
  // An account without a churn model has none.
  assert.deepEqual((await settled(acme)).churn_probability_rises, { count: 0, customers: [] })
})
