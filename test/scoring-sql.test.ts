// The SQL of the scoring jobs and the pure functions of src/scoring/rules/score.ts agree: the same
// generated rules and values are fed to both, the SQL through a real PostgreSQL.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import * as v from 'valibot'
import fc from 'fast-check'
import type { PropertyDef as CatalogDef, PropertyType } from '../src/property.ts'
import {
  ScoringModelSchema,
  propertyLookup,
  type Rule,
  type ScoringModel,
} from '../src/scoring/rules/model.ts'
import { daysBetween } from '../src/dates.ts'
import {
  churnRisk,
  summarizeHistory,
  upsellScore,
  weightedScore,
} from '../src/scoring/rules/score.ts'
import { churnRiskSql, upsellScoreSql, weightedScoreSql } from '../src/scoring/rules/sql.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService({}, { http: false, worker: false })
})
after(async () => {
  await s?.stop()
})

const TODAY = '2026-06-15'
const addDays = (date: string, days: number) =>
  new Date(Date.parse(date) + days * 86_400_000).toISOString().slice(0, 10)

// Properties of every type, metrics and attributes, for customers and contacts alike.
const DEFS: CatalogDef[] = [
  { codename: 'm_num', kind: 'metric', type: 'number' },
  { codename: 'm_date', kind: 'metric', type: 'date' },
  { codename: 'm_str', kind: 'metric', type: 'string' },
  { codename: 'm_bool', kind: 'metric', type: 'boolean' },
  { codename: 'a_num', kind: 'attribute', type: 'number' },
  { codename: 'a_date', kind: 'attribute', type: 'date' },
  { codename: 'a_str', kind: 'attribute', type: 'string' },
  { codename: 'a_bool', kind: 'attribute', type: 'boolean' },
]
const { typeOf, isMetric } = propertyLookup(DEFS)
const STRINGS = ['US', 'DE', 'FR', 'toString', '', 'ü']

// Scores of a values map: 0 or at least 1e-6 in magnitude, as the model schema demands.
const mapScore = fc.oneof(
  fc.constant(0),
  fc.integer({ min: -100, max: 100 }),
  fc.double({ min: 1e-6, max: 100, noNaN: true }).map((x) => (x > 50 ? -x : x)),
)
const bound = fc.oneof(
  fc.integer({ min: -50, max: 400 }),
  fc.double({ min: -1e15, max: 1e15, noNaN: true }),
)
const weight = fc.oneof(
  fc.integer({ min: 1, max: 100 }),
  fc.double({ min: 1e-6, max: 1e6, noNaN: true }),
)

const ruleFor = (codename: string, type: PropertyType): fc.Arbitrary<Rule> => {
  if (type === 'boolean')
    return fc.record({ codename: fc.constant(codename), weight, good: fc.boolean() })
  if (type === 'string') {
    return fc
      .record({
        codename: fc.constant(codename),
        weight,
        values: fc.dictionary(fc.constantFrom(...STRINGS), mapScore, { maxKeys: 4 }),
        default: fc.option(mapScore, { nil: undefined }),
      })
      .map(({ default: d, ...r }) => (d === undefined ? r : { ...r, default: d }))
  }
  return fc
    .record({ codename: fc.constant(codename), weight, bad: bound, good: bound })
    .filter((r) => r.bad !== r.good)
}

const rules = fc
  .subarray(DEFS, { minLength: 0 })
  .chain((defs) => fc.tuple(...defs.map((d) => ruleFor(d.codename, d.type))))
  .map((rs) => rs as Rule[])

// Values of every JSON type, and numbers and dates near the interesting edges.
const dateString = fc.oneof(
  fc.integer({ min: -800, max: 800 }).map((n) => addDays(TODAY, n)),
  fc.constantFrom(
    '2026-02-30',
    '0000-01-01',
    '0001-01-01',
    '9999-12-31',
    '2026-1-01',
    'today',
    '2026-06-15T00:00:00Z',
  ),
)
const jsonValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: -60, max: 450 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.double({ min: -1e-300, max: 1e-300, noNaN: true }),
  fc.constantFrom(...STRINGS),
  dateString,
  fc.boolean(),
  fc.constant(null),
  fc.constant({ nested: 1 }),
  fc.constant([1]),
)
const values = fc.dictionary(fc.constantFrom(...DEFS.map((d) => d.codename)), jsonValue, {
  maxKeys: 8,
})

// One statement per case: the rules are part of the SQL text. JSON travels as text: postgres.js
// would encode a string bound to a jsonb parameter a second time.
const sqlScore = async (
  rs: Rule[],
  metrics: string,
  attributes: string,
  date: string,
  tolerant = false,
) => {
  const { columns, values, sums, score, params } = weightedScoreSql(
    rs,
    typeOf,
    {
      metric: (key) => `x.m -> ${key}`,
      attribute: (key) => `x.a -> ${key}`,
      raw: (name) => `raw.${name}`,
      value: (name) => `y.${name}`,
      column: (name) => `y.${name}`,
      date: 'y.d',
      isMetric,
    },
    4,
    'w',
    tolerant,
  )
  const input = '(select $1::text::jsonb as m, $2::text::jsonb as a, $3::date as d) x'
  const raw = `(select ${['x.d', ...values.raw, ...columns.raw].join(', ')} from ${input} offset 0) raw`
  const levels =
    `(select ${['1 as one', ...sums].join(', ')} ` +
    `from (select ${['raw.d', ...values.typed, ...columns.typed].join(', ')} from ${raw} offset 0) y offset 0) z`
  const [row] = await s.sql.unsafe(`select ${score} as score from ${levels}`, [
    metrics,
    attributes,
    date,
    ...params,
  ] as never[])
  return row.score as number | null
}

test('weightedScoreSql gives what weightedScore gives', async () => {
  await fc.assert(
    fc.asyncProperty(
      rules,
      values,
      values,
      fc.integer({ min: -400, max: 400 }),
      async (rs, metrics, attributes, shift) => {
        const date = addDays(TODAY, shift)
        // Both read the values after a JSON round trip, as stored.
        const [m, a] = [JSON.parse(JSON.stringify(metrics)), JSON.parse(JSON.stringify(attributes))]
        const expected = weightedScore(rs, (c) => (isMetric(c) ? m : a)[c], date, typeOf).score
        assert.equal(
          await sqlScore(rs, JSON.stringify(metrics), JSON.stringify(attributes), date),
          expected,
        )
      },
    ),
    { numRuns: 400 },
  )
})

// Numbers stored before the one value rule (src/values.ts), which no double holds: JSON.parse reads
// them as Infinity (no value) or 0, and so does the tolerant SQL, where the plain cast raises.
test('tolerant weightedScoreSql reads a stored number no double holds as JSON.parse does', async () => {
  const huge = fc
    .constantFrom(
      '1e400',
      '-1e400',
      '1e1000',
      '1e-400',
      '-2e-324',
      '1.7976931348623157e308',
      '5e-324',
    )
    .map((n) => `~${n}~`)
  const texts = fc
    .dictionary(fc.constantFrom(...DEFS.map((d) => d.codename)), fc.oneof(jsonValue, huge), {
      maxKeys: 8,
    })
    // Each huge value is marked as a string, then written as the bare number text.
    .map((d) => JSON.stringify(d).replace(/"~([^~]+)~"/g, '$1'))
  await fc.assert(
    fc.asyncProperty(rules, texts, texts, async (rs, m, a) => {
      const [metrics, attributes] = [JSON.parse(m), JSON.parse(a)]
      const expected = weightedScore(
        rs,
        (c) => (isMetric(c) ? metrics : attributes)[c],
        TODAY,
        typeOf,
      ).score
      assert.equal(await sqlScore(rs, m, a, TODAY, true), expected, `${m} ${a}`)
    }),
    { numRuns: 300 },
  )
  await assert.rejects(
    sqlScore([{ codename: 'm_num', weight: 1, bad: 0, good: 1 }], '{"m_num":1e400}', '{}', TODAY),
    {
      code: '22003',
    },
  )
})

test('churnRiskSql and upsellScoreSql give what churnRisk and upsellScore give', async () => {
  const score = fc.option(fc.integer({ min: -100, max: 100 }), { nil: null })
  const cases = fc.sample(
    fc.record({
      e: score,
      f: score,
      d: fc.option(fc.integer({ min: -200, max: 200 }), { nil: null }),
      days: fc.integer({ min: -100, max: 1000 }),
    }),
    3000,
  )
  // Every combination of exact .5 ties is in the sample too: e and f multiples of 10 and
  // d of 10/3 make them.
  for (const e of [-100, -50, -10, 0, 10, 50, 100])
    for (const d of [-100, -10, 10, 100]) cases.push({ e, f: 10, d, days: 45 })
  const rows = await s.sql.unsafe(
    `
    select ${churnRiskSql('x.e', 'x.f', 'x.d', 'x.days')} as churn, ${upsellScoreSql('x.e', 'x.f', 'x.d')} as upsell
    from jsonb_to_recordset($1::text::jsonb) as x(i integer, e integer, f integer, d integer, days integer)
    order by x.i`,
    [JSON.stringify(cases.map((c, i) => ({ i, ...c })))] as never[],
  )
  cases.forEach((c, i) => {
    assert.equal(rows[i].churn, churnRisk(c.e, c.f, c.d, c.days), JSON.stringify(c))
    assert.equal(rows[i].upsell, upsellScore(c.e, c.f, c.d), JSON.stringify(c))
  })
})

// The whole job over generated accounts: engagement of every snapshot, the history summary, fit,
// churn risk, upsell and the lifting of automatic churn, against the pure functions.
const snapshotDate = fc
  .oneof(fc.integer({ min: -420, max: 30 }), fc.integer({ min: -40, max: 0 }))
  .map((n) => addDays(TODAY, n))
// Mostly well-typed metric values, so that most snapshots score and trends overflow 15 records.
const snapshotValues = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record(
      {
        m_num: fc.integer({ min: -60, max: 450 }),
        m_bool: fc.boolean(),
        m_str: fc.constantFrom(...STRINGS),
      },
      { requiredKeys: ['m_num'] },
    ),
  },
  { weight: 1, arbitrary: values },
)
// The churn date lies relative to the latest snapshot, so that lifting is tried right at its
// bounds (inactive_days 5 and 30 are generated often).
const record = fc.record({
  attributes: values,
  metrics: values,
  snapshots: fc.uniqueArray(fc.record({ date: snapshotDate, values: snapshotValues }), {
    selector: (x) => x.date,
    maxLength: 30,
    size: 'max',
  }),
  churn: fc.constantFrom(null, 'manual', 'inactive'),
  churnedAfterLatest: fc.oneof(
    fc.constantFrom(-1, 0, 1, 4, 5, 6, 29, 30, 31),
    fc.integer({ min: -200, max: 200 }),
  ),
})
const latestDate = (r: { snapshots: { date: string }[] }) =>
  r.snapshots
    .map((x) => x.date)
    .sort()
    .at(-1) ?? TODAY
const model = fc.record({
  customer: fc.record({ engagement: rules, fit: rules }),
  contact: fc.record({ engagement: rules }),
  churn: fc
    .record({
      inactive_days: fc.oneof(fc.constantFrom(undefined, 5, 30), fc.integer({ min: 1, max: 120 })),
    })
    .map((c) => (c.inactive_days === undefined ? {} : c)),
})

type GeneratedRecord = typeof record extends fc.Arbitrary<infer R> ? R : never

let run = 0
const seedAccount = async (m: ScoringModel | null, records: GeneratedRecord[]) => {
  const [account] =
    await s.sql`insert into accounts (name, tracker_key) values ('Gen', ${`CS-GEN${++run}`})
      returning id`
  const id = account.id as number
  const propertyDefs = ['customer', 'contact'].flatMap((entity) =>
    DEFS.map((d) => ({ account_id: id, entity, ...d })),
  )
  await s.sql`insert into property_defs ${s.sql(propertyDefs)}`
  if (m)
    await s.sql`insert into scoring_models (account_id, model)
      values (${id}, ${s.sql.json(m as never)})`
  const customers = await s.sql`
    insert into customers (account_id, external_id, attributes, metrics, is_churned, churned_date,
      churn_reason)
    select ${id}, 'c' || x.i, x.attributes, x.metrics, x.reason is not null, case
      when x.reason is not null then x.churned end, x.reason
    from jsonb_to_recordset(${s.sql.json(
      records.map((r, i) => ({
        i,
        attributes: r.attributes,
        metrics: r.metrics,
        reason: r.churn,
        churned: addDays(latestDate(r), r.churnedAfterLatest),
      })) as never,
    )}) as x(i int, attributes jsonb, metrics jsonb, reason text, churned date)
    order by x.i returning service_id`
  const contactRows = records.map((r, i) => ({
    i,
    customer_id: customers[i].service_id,
    attributes: r.attributes,
  }))
  const contacts = await s.sql`
    insert into contacts (account_id, external_id, customer_id, attributes)
    select ${id}, 't' || x.i, x.customer_id, x.attributes
    from jsonb_to_recordset(${s.sql.json(contactRows as never)})
      as x(i int, customer_id bigint, attributes jsonb)
    order by x.i returning service_id`
  const snapshots = (ids: { service_id: number }[]) =>
    records.flatMap((r, i) =>
      r.snapshots.map((x) => ({ id: ids[i].service_id, date: x.date, values: x.values })),
    )
  await s.sql`
    insert into customer_snapshots (account_id, customer_id, date, "values")
    select ${id}, x.id, x.date, x.values
    from jsonb_to_recordset(${s.sql.json(snapshots(customers as never) as never)})
      as x(id bigint, date date, "values" jsonb)`
  // A stale history and scores that the job must replace.
  await s.sql`
    insert into customer_scores (account_id, customer_id, external_id, history_dates,
      history_scores, last_seen,
      engagementscore, fitscore)
    select s.account_id, s.customer_id, c.external_id, array_agg(s.date order by s.date),
      array_agg(999 order by s.date), max(s.date), 999, 999
    from customer_snapshots s join customers c on c.account_id = s.account_id
      and c.service_id = s.customer_id
    where s.account_id = ${id} group by 1, 2, 3`
  await s.sql`
    insert into contact_snapshots (account_id, contact_id, date, "values")
    select ${id}, x.id, x.date, x.values
    from jsonb_to_recordset(${s.sql.json(snapshots(contacts as never) as never)})
      as x(id bigint, date date, "values" jsonb)`
  return id
}

// What the pure functions make of the stored rows (read back, so both see the same JSON).
const checkEntity = async (
  accountId: number,
  entity: 'customer' | 'contact',
  m: ScoringModel | null,
) => {
  const [records, snapshots] =
    entity === 'customer'
      ? [
          await s.sql`
        select r.*, to_char(h.last_seen, 'YYYY-MM-DD') as last_seen,
          to_char(r.churned_date, 'YYYY-MM-DD') as
          churned_date,
          h.engagementscore, h.engagementscore_difference, h.engagementscore_trend, h.fitscore,
          h.churn_risk,
          h.upsell_score,
          to_json(coalesce(h.history_dates, '{}')) as history_dates,
            coalesce(h.history_scores, '{}') as history_scores
        from customers r left join customer_scores h on h.account_id = r.account_id
          and h.customer_id = r.service_id
        where r.account_id = ${accountId}`,
          await s.sql`select customer_id as record_id, to_char(date, 'YYYY-MM-DD') as date, "values"
            from customer_snapshots where account_id = ${accountId}`,
        ]
      : [
          await s.sql`
        select r.*, to_char(h.last_seen, 'YYYY-MM-DD') as last_seen, h.engagementscore,
          h.engagementscore_difference,
          h.engagementscore_trend,
          to_json(coalesce(h.history_dates, '{}')) as history_dates,
            coalesce(h.history_scores, '{}') as history_scores
        from contacts r left join contact_scores h on h.account_id = r.account_id
          and h.contact_id = r.service_id
        where r.account_id = ${accountId}`,
          await s.sql`select contact_id as record_id, to_char(date, 'YYYY-MM-DD') as date, "values"
            from contact_snapshots where account_id = ${accountId}`,
        ]
  const engagementRules =
    (entity === 'customer' ? m?.customer?.engagement : m?.contact?.engagement) ?? []
  for (const r of records) {
    const own = snapshots
      .filter((x) => x.record_id === r.service_id)
      .map((x) => ({
        date: x.date as string,
        score: weightedScore(
          engagementRules,
          (c) => (isMetric(c) ? x.values : r.attributes)[c],
          x.date,
          typeOf,
        ).score,
      }))
      .sort((a, b) => (a.date < b.date ? -1 : 1))
    // The stored history: one score per scored snapshot, in date order.
    const scored = own.filter((x) => x.score !== null)
    assert.deepEqual(
      { dates: r.history_dates, scores: r.history_scores },
      { dates: scored.map((x) => x.date), scores: scored.map((x) => x.score) },
      `${entity} ${r.external_id} history`,
    )
    const history = summarizeHistory(own, TODAY)
    assert.deepEqual(
      {
        last_seen: r.last_seen,
        engagementscore: r.engagementscore,
        engagementscore_difference: r.engagementscore_difference,
        engagementscore_trend: r.engagementscore_trend,
      },
      history,
      `${entity} ${r.external_id}`,
    )
    if (entity === 'contact') continue
    const fit = weightedScore(
      m?.customer?.fit ?? [],
      (c) => (isMetric(c) ? r.metrics : r.attributes)[c],
      TODAY,
      typeOf,
    ).score
    assert.equal(r.fitscore, fit)
    const days = history.last_seen === null ? 0 : daysBetween(history.last_seen, TODAY)
    assert.equal(
      r.churn_risk,
      churnRisk(history.engagementscore, fit, history.engagementscore_difference, days),
    )
    assert.equal(
      r.upsell_score,
      upsellScore(history.engagementscore, fit, history.engagementscore_difference),
    )
  }
}

test('the scoring job gives what the pure functions give, record by record', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.option(model, { nil: null }),
      fc.array(record, { minLength: 1, maxLength: 5 }),
      async (generated, records) => {
        const m = generated && v.parse(ScoringModelSchema, generated)
        const accountId = await seedAccount(m, records)
        const churnBefore = await s.sql`
      select service_id, is_churned, to_char(churned_date, 'YYYY-MM-DD') as churned_date,
      churn_reason
      from customers where account_id = ${accountId} order by service_id`
        await scoreRecords(s.sql, { account_id: accountId, entity: 'customer' }, { today: TODAY })
        await scoreRecords(s.sql, { account_id: accountId, entity: 'contact' }, { today: TODAY })
        await checkEntity(accountId, 'customer', m)
        await checkEntity(accountId, 'contact', m)
        // Churn: only an automatic one is lifted, once last_seen is within inactive_days
        // of the churn date.
        const inactiveDays = m?.churn?.inactive_days ?? 0
        const after = await s.sql`
      select service_id, is_churned, to_char(churned_date, 'YYYY-MM-DD') as churned_date,
        churn_reason,
        to_char(h.last_seen, 'YYYY-MM-DD') as last_seen
      from customers c left join customer_scores h on h.account_id = c.account_id
        and h.customer_id = c.service_id
      where c.account_id = ${accountId} order by service_id`
        churnBefore.forEach((b, i) => {
          const a = after[i]
          const lifted =
            b.churn_reason === 'inactive' &&
            a.last_seen !== null &&
            a.last_seen >= addDays(b.churned_date, -inactiveDays)
          assert.deepEqual(
            {
              is_churned: a.is_churned,
              churned_date: a.churned_date,
              churn_reason: a.churn_reason,
            },
            lifted
              ? { is_churned: false, churned_date: null, churn_reason: null }
              : {
                  is_churned: b.is_churned,
                  churned_date: b.churned_date,
                  churn_reason: b.churn_reason,
                },
          )
        })
      },
    ),
    { numRuns: 60, endOnFailure: true },
  )
})

// One engagement rule on a metric and one fit rule on an attribute, for the tests of
// what a run writes.
const WRITES_MODEL = v.parse(ScoringModelSchema, {
  customer: {
    engagement: [{ codename: 'm_num', weight: 1, bad: 0, good: 40 }],
    fit: [{ codename: 'a_bool', weight: 1, good: true }],
  },
})

test('a second run over unchanged data writes nothing', async () => {
  const [records] = fc.sample(fc.array(record, { minLength: 3, maxLength: 3 }), {
    numRuns: 1,
    seed: 7,
  })
  const accountId = await seedAccount(
    WRITES_MODEL,
    records.map((r) => ({
      ...r,
      snapshots: [
        { date: TODAY, values: { m_num: 7 } },
        ...r.snapshots.filter((x) => x.date !== TODAY),
      ],
    })),
  )
  await scoreRecords(s.sql, { account_id: accountId, entity: 'customer' }, { today: TODAY })
  const xmin = () => s.sql`
    select (select array_agg(xmin::text order by service_id) from customers
      where account_id = ${accountId}) as c,
      (select array_agg(xmin::text order by customer_id, date) from customer_snapshots
        where account_id = ${accountId}) as s`
  const before = await xmin()
  const ids = (await s.sql`select service_id from customers where account_id = ${accountId}`).map(
    (r) => r.service_id as number,
  )
  await scoreRecords(s.sql, { account_id: accountId, entity: 'customer', ids }, { today: TODAY })
  await scoreRecords(s.sql, { account_id: accountId, entity: 'customer' }, { today: TODAY })
  assert.deepEqual(await xmin(), before)
})

// The insert of missing score rows looks for existing rows among the batch's records only (not the
// whole account's, which made every batch read all the account's score rows).
test('scoring some records inserts and updates their score rows only', async () => {
  const [records] = fc.sample(fc.array(record, { minLength: 6, maxLength: 6 }), {
    numRuns: 1,
    seed: 11,
  })
  // A snapshot and a fit for every record: each one has a (stale) score row to begin with.
  const accountId = await seedAccount(
    WRITES_MODEL,
    records.map((r) => ({
      ...r,
      attributes: { ...r.attributes, a_bool: true },
      snapshots: [
        { date: TODAY, values: { m_num: 7 } },
        ...r.snapshots.filter((x) => x.date !== TODAY),
      ],
    })),
  )
  const ids = (
    await s.sql`select service_id from customers where account_id = ${accountId}
      order by service_id`
  ).map((r) => r.service_id as number)
  // Records 0, 1 and 4 have no score row; 0, 2 and 3 are scored.
  const missing = [ids[0], ids[1], ids[4]]
  await s.sql`delete from customer_scores where account_id = ${accountId}
    and customer_id in ${s.sql(missing)}`
  const chosen = [ids[0], ids[2], ids[3]]
  await scoreRecords(
    s.sql,
    { account_id: accountId, entity: 'customer', ids: chosen },
    { today: TODAY },
  )
  const rows = () => s.sql`
    select customer_id, xmin::text as xmin, engagementscore, fitscore from customer_scores
    where account_id = ${accountId} order by customer_id`
  const partial = await rows()
  assert.deepEqual(
    partial.map((r) => r.customer_id),
    [ids[0], ids[2], ids[3], ids[5]],
  )
  // The record outside the batch keeps its stale row.
  assert.deepEqual(
    partial.filter((r) => r.customer_id === ids[5]).map((r) => [r.engagementscore, r.fitscore]),
    [[999, 999]],
  )
  // Scoring the whole account adds the two missing rows and leaves the batch's rows as they were:
  // they already held the same scores.
  await scoreRecords(s.sql, { account_id: accountId, entity: 'customer' }, { today: TODAY })
  const full = await rows()
  assert.deepEqual(
    full.map((r) => r.customer_id),
    ids,
  )
  for (const id of chosen)
    assert.deepEqual(
      full.find((r) => r.customer_id === id),
      partial.find((r) => r.customer_id === id),
    )
  await checkEntity(accountId, 'customer', WRITES_MODEL)
})
