// Scoring through the HTTP API: uploads over several dates, then the stored scores, history,
// explanation, model change rescoring, automatic and manual churn, contacts. Dates are relative to
// today (UTC) so that the 365-day trend window and days since last_seen are deterministic; every
// expected number is computed by hand in the comments.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { uploadAndWait, waitForUpload } from './helpers/fixtures.ts'
import { scoreDaily } from '../src/scoring/daily.ts'

let s: TestService
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
})
after(async () => {
  await s?.stop()
})

const T = new Date().toISOString().slice(0, 10)
const day = (n: number) => new Date(Date.parse(T) + n * 86_400_000).toISOString().slice(0, 10)

type Account = Awaited<ReturnType<TestService['account']>>

const MODEL = {
  customer: {
    engagement: [
      { codename: 'logins', weight: 50, bad: 0, good: 40 },
      { codename: 'tickets', weight: 25, bad: 10, good: 0 },
      { codename: 'renewal_date', weight: 25, bad: 0, good: 180 },
    ],
    fit: [
      { codename: 'country', weight: 50, values: { US: 100, DE: 50 }, default: -100 },
      { codename: 'has_sso', weight: 50, good: true },
      { codename: 'renewal_date', weight: 50, bad: 0, good: 180 },
    ],
  },
  contact: { engagement: [{ codename: 'sessions', weight: 100, bad: 0, good: 20 }] },
}

const setUp = async () => {
  const a = await s.account()
  for (const [entity, kind, codename, type] of [
    ['customer', 'metric', 'logins', 'number'],
    ['customer', 'metric', 'tickets', 'number'],
    ['customer', 'attribute', 'country', 'string'],
    ['customer', 'attribute', 'has_sso', 'boolean'],
    ['contact', 'metric', 'sessions', 'number'],
  ])
    assert.equal(
      (await s.admin('POST', `/accounts/${a.id}/properties`, { entity, kind, codename, type }))
        .status,
      201,
    )
  await setModel(a, MODEL)
  return a
}

// Waits until the account's jobs (processing, scoring) are done; a failing job (a deadlock between
// the two queues, say) fails the test.
const settle = async (a: Account) => {
  const deadline = Date.now() + 60_000
  for (;;) {
    const jobs = await s.sql`select task_identifier, attempts, last_error from graphile_worker.jobs
      where queue_name in (${`account:${a.id}`}, ${`scoring:${a.id}`})`
    const failed = jobs.find((j) => j.attempts > 0 && j.last_error)
    if (failed) throw new Error(`${failed.task_identifier} failed: ${failed.last_error}`)
    if (jobs.length === 0) return
    if (Date.now() > deadline)
      throw new Error(`jobs still pending: ${jobs.map((j) => j.task_identifier).join(', ')}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const setModel = async (a: Account, model: unknown) => {
  const res = await s.admin('PUT', `/accounts/${a.id}/scoring`, model)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  await settle(a)
}

const uploadCustomers = async (a: Account, customers: object[]) => {
  const items = customers.map((c) => ({ name: 'Customer', ...c }))
  const done = await uploadAndWait(a.api, 'customers', items, { scored: true })
  assert.ok(!Number.isNaN(Date.parse(done.scored_at)))
  return done
}

const uploadContacts = (a: Account, contacts: object[]) =>
  uploadAndWait(a.api, 'contacts', contacts, { scored: true, status: null })

const getCustomer = async (a: Account, id: string) => {
  const res = await a.api(`/api/v1/customer/${id}`, undefined, 'GET')
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}

// What search does not show (upsell, churn details) is read from the table.
const stored = async (a: Account, id: string) => {
  const [row] = await s.sql`
    select engagementscore, engagementscore_difference, engagementscore_trend,
      to_char(last_seen, 'YYYY-MM-DD') as
      last_seen,
      fitscore, churn_risk, upsell_score, is_churned,
        to_char(churned_date, 'YYYY-MM-DD') as churned_date, churn_reason
    from customers c left join customer_scores h on h.account_id = c.account_id
      and h.customer_id = c.service_id
    where c.account_id = ${a.id} and c.external_id = ${id}`
  return row
}

const scoresOf = (row: Record<string, unknown>) => ({
  engagementscore: row.engagementscore,
  engagementscore_difference: row.engagementscore_difference,
  engagementscore_trend: row.engagementscore_trend,
  last_seen: row.last_seen,
  fitscore: row.fitscore,
  churn_risk: row.churn_risk,
})

// acme: DE, SSO, renewal in 90 days; four snapshots, the oldest outside the trend window.
const ACME = {
  external_id: 'acme',
  attributes: { country: 'DE', has_sso: true, renewal_date: day(90) },
  metrics: [
    // logins 100, tickets 100, renewal in 490 days 100 -> 100
    { date: day(-400), logins: 40, tickets: 0 },
    // logins -100 + 200 * 10/40 = -50, tickets -100 + 200 * (5 - 10)/(0 - 10) = 0,
    // renewal in 120 days -100 + 200 * 120/180 = 33.33
    // (50 * -50 + 25 * 0 + 25 * 33.33) / 100 = -16.67 -> -17
    { date: day(-30), logins: 10, tickets: 5 },
    // logins 50, tickets -100 + 200 * -8/-10 = 60, renewal in 100 days 11.11:
    // (2500 + 1500 + 277.78) / 100 = 42.78 -> 43
    { date: day(-10), logins: 30, tickets: 2 },
    // logins 0, no tickets (weights renormalised to 75), renewal in 95 days 5.56: 25 *
    // 5.56 / 75 = 1.85 -> 2
    { date: day(-5), logins: 20 },
  ],
}
// beta: every value at its worst.
const BETA = {
  external_id: 'beta',
  attributes: { country: 'FR', has_sso: false },
  metrics: [{ date: day(-2), logins: 0, tickets: 10 }],
}
// gamma: attributes only, never seen.
const GAMMA = { external_id: 'gamma', attributes: { country: 'US' } }

test('scores, history, churn risk, upsell and explanation after an upload', async () => {
  const a = await setUp()
  await uploadCustomers(a, [ACME, BETA, GAMMA])

  const acme = await getCustomer(a, 'acme')
  assert.deepEqual(scoresOf(acme), {
    engagementscore: 2,
    engagementscore_difference: -41, // 2 - 43
    engagementscore_trend: { [day(-30)]: -17, [day(-10)]: 43, [day(-5)]: 2 },
    last_seen: day(-5),
    // country 50, SSO 100, renewal in 90 days 0: (2500 + 5000 + 0) / 150 = 50
    fitscore: 50,
    // 50 - 0.35 * 2 - 0.15 * 50 - 0.3 * -41 + 20 * 5 / 90 = 55.21 -> 55
    churn_risk: 55,
  })
  // 50 + 0.3 * 2 + 0.2 * 50 + 0.15 * -41 = 54.45
  assert.equal((await stored(a, 'acme')).upsell_score, 54)
  // Engagement explained on the snapshot of last_seen, fit as of today.
  assert.deepEqual(acme.score_explanation, {
    engagement: [
      { codename: 'logins', label: 'logins', contribution: 0 },
      { codename: 'renewal_date', label: 'renewal_date', contribution: 1.85 },
    ],
    fit: [
      { codename: 'country', label: 'country', contribution: 16.67 },
      { codename: 'has_sso', label: 'has_sso', contribution: 33.33 },
      { codename: 'renewal_date', label: 'renewal_date', contribution: 0 },
    ],
    risk_drivers: [],
    change_drivers: [],
    health_drivers: [
      { codename: 'has_sso', label: 'has_sso', score: 'fit', contribution: 33.33 },
      { codename: 'country', label: 'country', score: 'fit', contribution: 16.67 },
      { codename: 'renewal_date', label: 'renewal_date', score: 'engagement', contribution: 1.85 },
    ],
  })
  const [history] =
    await s.sql`select h.history_scores, cardinality(h.history_dates) as n from customer_scores h
    join customers c on c.account_id = h.account_id and c.service_id = h.customer_id
    where c.account_id = ${a.id} and c.external_id = 'acme'`
  assert.deepEqual({ ...history }, { history_scores: [100, -17, 43, 2], n: 4 })

  const beta = await getCustomer(a, 'beta')
  assert.deepEqual(scoresOf(beta), {
    engagementscore: -100, // (50 * -100 + 25 * -100) / 75, no renewal date
    engagementscore_difference: null,
    engagementscore_trend: { [day(-2)]: -100 },
    last_seen: day(-2),
    fitscore: -100, // FR takes the default -100, no SSO -100
    churn_risk: 100, // 50 + 35 + 15 + 0 + 0.44 = 100.44, clamped
  })
  assert.equal((await stored(a, 'beta')).upsell_score, 0) // 50 - 30 - 20 = 0
  assert.deepEqual(beta.score_explanation.risk_drivers, [
    { codename: 'logins', label: 'logins', score: 'engagement', contribution: -66.67 },
    { codename: 'country', label: 'country', score: 'fit', contribution: -50 },
    { codename: 'has_sso', label: 'has_sso', score: 'fit', contribution: -50 },
  ])
  assert.deepEqual(beta.score_explanation.health_drivers, [])

  // Never seen: fit only (US 100, the rest missing); no engagement, so no churn risk or upsell.
  const gamma = await getCustomer(a, 'gamma')
  assert.deepEqual(scoresOf(gamma), {
    engagementscore: null,
    engagementscore_difference: null,
    engagementscore_trend: null,
    last_seen: null,
    fitscore: 100,
    churn_risk: null,
  })
  assert.equal((await stored(a, 'gamma')).upsell_score, null)
  assert.deepEqual(gamma.score_explanation.engagement, [])
  assert.deepEqual(gamma.score_explanation.health_drivers, [
    { codename: 'country', label: 'country', score: 'fit', contribution: 100 },
  ])

  // A later upload merges into an existing snapshot and rescoring follows the new values:
  // day -5 gets tickets 0 (100): (0 + 2500 + 25 * 5.56) / 100 = 26.39 -> 26.
  await uploadCustomers(a, [{ external_id: 'acme', metrics: [{ date: day(-5), tickets: 0 }] }])
  const again = await getCustomer(a, 'acme')
  assert.equal(again.engagementscore, 26)
  assert.equal(again.engagementscore_difference, -17) // 26 - 43
  assert.equal(again.engagementscore_trend[day(-5)], 26)
})

test('the trend keeps the latest 15 records within the year before today', async () => {
  const a = await setUp()
  // Twenty snapshots 10 days apart, logins rising: days -190 .. 0; one in the future counts for
  // last_seen but not for the trend.
  const metrics = Array.from({ length: 20 }, (_, i) => ({
    date: day(-190 + 10 * i),
    logins: 2 * i,
  }))
  await uploadCustomers(a, [
    { external_id: 'x', metrics: [...metrics, { date: day(3), logins: 40 }] },
  ])
  const x = await getCustomer(a, 'x')
  // logins 2i -> -100 + 200 * 2i / 40 = -100 + 10i
  const expected = Object.fromEntries(metrics.slice(5).map((m, i) => [m.date, -100 + 10 * (i + 5)]))
  assert.deepEqual(x.engagementscore_trend, expected)
  assert.equal(x.last_seen, day(3))
  assert.equal(x.engagementscore, 100)
  assert.equal(x.engagementscore_difference, 100 - 90)
})

test('a model change rescores the whole account; without a contact model contacts have no scores', async () => {
  const a = await setUp()
  await uploadCustomers(a, [ACME, BETA])
  // sessions 10 -> 0, 15 -> -100 + 200 * 15/20 = 50
  await uploadContacts(a, [
    {
      customer_external_id: 'acme',
      contact_external_id: 'p1',
      contact_name: 'Pat',
      metrics: [
        { date: day(-3), sessions: 10 },
        { date: day(-1), sessions: 15 },
      ],
    },
  ])
  const contact = (await a.api('/api/v1/customer/acme/contact/p1', undefined, 'GET')).body
  assert.deepEqual(
    {
      e: contact.engagementscore,
      d: contact.engagementscore_difference,
      t: contact.engagementscore_trend,
      l: contact.last_seen,
    },
    { e: 50, d: 50, t: { [day(-3)]: 0, [day(-1)]: 50 }, l: day(-1) },
  )

  // Logins alone: acme's snapshots score 100, -50, 50, 0.
  await setModel(a, {
    customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 40 }] },
  })
  const acme = await getCustomer(a, 'acme')
  assert.deepEqual(scoresOf(acme), {
    engagementscore: 0,
    engagementscore_difference: -50,
    engagementscore_trend: { [day(-30)]: -50, [day(-10)]: 50, [day(-5)]: 0 },
    last_seen: day(-5),
    fitscore: null, // no fit rules
    churn_risk: 66, // 50 - 0 - 0 - 0.3 * -50 + 20 * 5 / 90 = 66.11
  })
  // 50 + 0.15 * -50 = 42.5, half away from zero
  assert.equal((await stored(a, 'acme')).upsell_score, 43)
  assert.equal((await getCustomer(a, 'beta')).engagementscore, -100)
  const rescored = (await a.api('/api/v1/customer/acme/contact/p1', undefined, 'GET')).body
  assert.deepEqual(
    {
      e: rescored.engagementscore,
      d: rescored.engagementscore_difference,
      t: rescored.engagementscore_trend,
      l: rescored.last_seen,
    },
    { e: null, d: null, t: null, l: null },
  )
  const [{ snapshots }] =
    await s.sql`select count(*)::int as snapshots from contact_snapshots where account_id = ${a.id}`
  assert.equal(snapshots, 2)
  const [{ scored }] =
    await s.sql`select count(*)::int as scored from contact_scores where account_id = ${a.id}
    and history_scores <> '{}'`
  assert.equal(scored, 0, 'no snapshot is scored')
})

// The stored histories are the snapshots' scores under the engagement rules: a model that keeps
// those rules rescores from them (a snapshot changed behind the service's back shows which path
// ran), and one that changes them scores the snapshots again.
test('a model change that keeps the engagement rules rescores from the stored histories', async () => {
  const a = await setUp()
  await uploadCustomers(a, [ACME, BETA])
  const before = scoresOf(await getCustomer(a, 'acme'))
  await s.sql`update customer_snapshots set "values" = '{"logins": 0, "tickets": 10}'
    where account_id = ${a.id}`
  // Fit alone changes, its rules in another order and written with other key orders.
  const fit = [{ weight: 1, good: false, codename: 'has_sso' }]
  await setModel(a, {
    contact: MODEL.contact,
    customer: { fit, engagement: MODEL.customer.engagement },
  })
  const kept = scoresOf(await getCustomer(a, 'acme'))
  // acme has SSO, which this rule scores -100; churn risk follows the new fit: 50 - 0.35 * 2
  // - 0.15 * -100 - 0.3 * -41 + 20 * 5 / 90 = 77.71 (engagement 2, difference 2 - 43 = -41).
  assert.deepEqual(kept, { ...before, fitscore: -100, churn_risk: 78 })
  // The engagement rules change: the changed snapshots are scored again (logins 0,
  // tickets 10: -100).
  await setModel(a, {
    customer: { fit, engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 40 }] },
  })
  const rescored = scoresOf(await getCustomer(a, 'acme'))
  assert.equal(rescored.engagementscore, -100)
  assert.deepEqual(rescored.engagementscore_trend, {
    [day(-30)]: -100,
    [day(-10)]: -100,
    [day(-5)]: -100,
  })
})

const automaticChurnTitle =
  'automatic churn after inactive_days, lifted by a snapshot dated within the window; manual churn stays'
test(automaticChurnTitle, async () => {
  const a = await setUp()
  await setModel(a, { ...MODEL, churn: { inactive_days: 30 } })
  await uploadCustomers(a, [
    // exactly 30 days: not older
    { external_id: 'recent', metrics: [{ date: day(-30), logins: 10 }] },
    { external_id: 'idle', metrics: [{ date: day(-31), logins: 10 }] },
    { external_id: 'manual', metrics: [{ date: day(-200), logins: 10 }] },
    { external_id: 'never', attributes: { country: 'US' } }, // no last_seen: not judged
  ])
  const put = await a.api(
    '/api/v1/customer/manual',
    { is_churned: true, churned_date: day(-100) },
    'PUT',
  )
  assert.equal(put.status, 200, JSON.stringify(put.body))
  await settle(a)

  assert.equal(await scoreDaily(s.sql, a.id), 1)
  const churn = async (id: string) => {
    const r = await stored(a, id)
    return { is_churned: r.is_churned, churned_date: r.churned_date, churn_reason: r.churn_reason }
  }
  const active = { is_churned: false, churned_date: null, churn_reason: null }
  assert.deepEqual(await churn('idle'), {
    is_churned: true,
    churned_date: T,
    churn_reason: 'inactive',
  })
  assert.deepEqual(await churn('recent'), active)
  assert.deepEqual(await churn('never'), active)
  assert.deepEqual(await churn('manual'), {
    is_churned: true,
    churned_date: day(-100),
    churn_reason: 'manual',
  })
  // Churned customers are searchable only with an is_churned filter; the read shows the state.
  assert.equal((await getCustomer(a, 'idle')).is_churned, true)
  // The daily run again changes nothing.
  assert.equal(await scoreDaily(s.sql, a.id), 0)

  // A late snapshot still older than 30 days before the churn date does not lift it...
  await uploadCustomers(a, [{ external_id: 'idle', metrics: [{ date: day(-40), logins: 20 }] }])
  assert.deepEqual(await churn('idle'), {
    is_churned: true,
    churned_date: T,
    churn_reason: 'inactive',
  })
  // ...one dated today does, and a new snapshot never lifts a manual churn.
  await uploadCustomers(a, [
    { external_id: 'idle', metrics: [{ date: T, logins: 20 }] },
    { external_id: 'manual', metrics: [{ date: T, logins: 20 }] },
  ])
  assert.deepEqual(await churn('idle'), active)
  assert.equal((await stored(a, 'idle')).last_seen, T)
  assert.deepEqual(await churn('manual'), {
    is_churned: true,
    churned_date: day(-100),
    churn_reason: 'manual',
  })
  assert.equal(await scoreDaily(s.sql, a.id), 0)
  assert.deepEqual(await churn('manual'), {
    is_churned: true,
    churned_date: day(-100),
    churn_reason: 'manual',
  })

  // Reactivation by hand, then the daily job churns it again automatically only when inactive.
  assert.equal((await a.api('/api/v1/customer/manual', { is_churned: false }, 'PUT')).status, 200)
  await settle(a)
  assert.deepEqual(await churn('manual'), active)
  assert.equal(await scoreDaily(s.sql, a.id), 0) // last seen today
})

test('the daily run moves the time-dependent scores and is fanned out per account by the cron task', async () => {
  const a = await setUp()
  await uploadCustomers(a, [{ ...ACME, external_id: 'acme' }])
  const before = await stored(a, 'acme')
  assert.equal(before.churn_risk, 55)
  // Scored as of 40 days later: last_seen 45 days ago (20 * 45 / 90 = 10), renewal in 50 days for
  // fit (-100 + 200 * 50 / 180 = -44.44: (2500 + 5000 - 2222.22) / 150 = 35.19 -> 35); days -30,
  // -10 and -5 are still within the year.
  await scoreDaily(s.sql, a.id, day(40))
  const later = await stored(a, 'acme')
  assert.equal(later.fitscore, 35)
  // 50 - 0.7 - 0.15 * 35 + 12.3 + 10 = 66.35 -> 66
  assert.equal(later.churn_risk, 66)
  assert.equal(later.engagementscore, 2) // snapshot scores do not depend on today
  assert.deepEqual(later.engagementscore_trend, { [day(-30)]: -17, [day(-10)]: 43, [day(-5)]: 2 })
  // 400 days later the trend window holds nothing.
  await scoreDaily(s.sql, a.id, day(400))
  assert.equal((await stored(a, 'acme')).engagementscore_trend, null)

  // The cron task (no account) adds one score_daily job per account with a model.
  await s.sql`select graphile_worker.add_job('score_daily', '{}'::json)`
  const deadline = Date.now() + 60_000
  while ((await stored(a, 'acme')).engagementscore_trend === null) {
    if (Date.now() > deadline) throw new Error('score_daily did not run')
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.deepEqual((await stored(a, 'acme')).engagementscore_trend, {
    [day(-30)]: -17,
    [day(-10)]: 43,
    [day(-5)]: 2,
  })
})

const sideBySideTitle =
  "uploads and scoring of the same records run side by side without deadlocks, ending at the last upload's scores"
test(sideBySideTitle, async () => {
  const a = await setUp()
  // Processing (the account's queue) and scoring (its scoring queue) of one set of customers
  // overlap: each upload is sent while the previous one's scoring may run, plus a model change
  // rescoring everything and tracking events changing attributes meanwhile.
  const ids = Array.from({ length: 400 }, (_, i) => `dl-${i}`)
  const batch = (round: number) =>
    ids.map((external_id, i) => ({
      external_id,
      name: `Customer ${i}`,
      attributes: { country: round % 2 ? 'US' : 'DE', has_sso: i % 2 === 0 },
      metrics: [{ date: day(-round), logins: (i + round) % 40, tickets: round % 10 }],
    }))
  await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
  const sent = []
  for (let round = 9; round >= 0; round--) {
    const res = await a.api('/api/v1/customers', { customers: batch(round) })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    sent.push(res.body.upload_id)
    if (round === 5)
      assert.equal(
        (
          await s.admin('PUT', `/accounts/${a.id}/scoring`, {
            ...MODEL,
            churn: { inactive_days: 30 },
          })
        ).status,
        200,
      )
    if (round % 3 === 0) {
      const events = ids.slice(0, 100).map((customer, i) => ({
        name: 'login',
        timestamp: Date.now() - i,
        identification: { customer },
        data: { customer: { has_sso: round % 2 === 0 } },
      }))
      assert.equal(
        (await a.api('/api/tracker/track', { trackerKey: a.trackerKey, events })).status,
        200,
      )
    }
  }
  await settle(a)
  for (const id of sent)
    assert.equal((await waitForUpload(a.api, id, 60_000, true)).status, 'processed')
  // The last upload (round 0, dated today) decides the latest scores: logins i % 40 of
  // 40, tickets 0 of 10.
  const row = await stored(a, 'dl-20')
  assert.deepEqual(
    { e: row.engagementscore, l: row.last_seen },
    { e: Math.round((50 * (-100 + (200 * 20) / 40) + 25 * 100) / 75), l: T },
  )
  const [{ n }] = await s.sql`
    select count(*)::int as n from customer_snapshots s left
      join customer_scores h on h.account_id = s.account_id
      and h.customer_id = s.customer_id
    where s.account_id = ${a.id} and (h.customer_id is null or not s.date = any(h.history_dates))`
  assert.equal(n, 0, 'every snapshot is scored')
})
