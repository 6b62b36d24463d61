import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as v from 'valibot'
import fc from 'fast-check'
import type { PropertyType } from '../src/property.ts'
import { daysBetween } from '../src/dates.ts'
import {
  checkModelAgainstProperties,
  hasCustomerModel,
  ScoringModelSchema,
  type Rule,
  type ScoringModel,
} from '../src/scoring/rules/model.ts'
import {
  churnRisk,
  explain,
  propertyScore,
  roundHalfAway,
  summarizeHistory,
  upsellScore,
  weightedScore,
} from '../src/scoring/rules/score.ts'
import { weightedScoreSql } from '../src/scoring/rules/sql.ts'

// The example model of docs/scoring.md.
const EXAMPLE_MODEL = {
  customer: {
    engagement: [
      { codename: 'logins', weight: 50, bad: 0, good: 40 },
      { codename: 'open_tickets', weight: 25, bad: 10, good: 0 },
      { codename: 'renewal_date', weight: 25, bad: 0, good: 180 },
    ],
    fit: [
      { codename: 'country', weight: 50, values: { US: 100, DE: 50 }, default: -100 },
      { codename: 'has_sso', weight: 50, good: true },
    ],
  },
  contact: { engagement: [{ codename: 'sessions', weight: 100, bad: 0, good: 20 }] },
  churn: { inactive_days: 90 },
}
const model = v.parse(ScoringModelSchema, EXAMPLE_MODEL)
const engagement = model.customer!.engagement!
const fit = model.customer!.fit!
const [logins, openTickets, renewal] = engagement
const [country, hasSso] = fit

const TYPES: Record<string, PropertyType> = {
  logins: 'number',
  open_tickets: 'number',
  renewal_date: 'date',
  country: 'string',
  has_sso: 'boolean',
}
const typeOf = (codename: string) => TYPES[codename]
const DAY = '2026-03-01'
const score = (rules: Rule[], values: Record<string, unknown>) =>
  weightedScore(rules, (c) => values[c], DAY, typeOf)

const issuePaths = (input: unknown) => {
  const result = v.safeParse(ScoringModelSchema, input, { abortEarly: false })
  assert.equal(result.success, false)
  return result.issues!.map((i) => '/' + (i.path ?? []).map((p) => String(p.key)).join('/'))
}

test('number property: linear between bad and good, clamped at both ends', () => {
  assert.equal(propertyScore(logins, 30, DAY, 'number'), 50) // -100 + 200 * 30 / 40
  assert.equal(propertyScore(logins, 0, DAY, 'number'), -100)
  assert.equal(propertyScore(logins, 40, DAY, 'number'), 100)
  assert.equal(propertyScore(logins, 100, DAY, 'number'), 100) // formula gives 400
  assert.equal(propertyScore(logins, -10, DAY, 'number'), -100) // formula gives -150
  assert.equal(propertyScore(logins, 1.7e308, DAY, 'number'), 100)
})

test('number property where lower is better (good < bad)', () => {
  assert.equal(propertyScore(openTickets, 2, DAY, 'number'), 60) // -100 + 200 * (2 - 10) / (0 - 10)
  assert.equal(propertyScore(openTickets, 10, DAY, 'number'), -100)
  assert.equal(propertyScore(openTickets, 0, DAY, 'number'), 100)
  assert.equal(propertyScore(openTickets, 15, DAY, 'number'), -100)
  assert.equal(propertyScore(openTickets, -5, DAY, 'number'), 100)
})

test('date property: days from the scoring date, negative in the past', () => {
  assert.equal(daysBetween('2026-03-01', '2026-05-30'), 90)
  assert.equal(daysBetween('2026-03-01', '2026-02-01'), -28)
  // 90 days ahead, bad 0 good 180
  assert.equal(propertyScore(renewal, '2026-05-30', DAY, 'date'), 0)
  assert.equal(propertyScore(renewal, '2026-08-28', DAY, 'date'), 100) // 180 days
  assert.equal(propertyScore(renewal, '2026-03-01', DAY, 'date'), -100)
  assert.equal(propertyScore(renewal, '2026-01-30', DAY, 'date'), -100) // 30 days past
  assert.equal(propertyScore(renewal, '2026-02-30', DAY, 'date'), null) // no such day
  assert.equal(propertyScore(renewal, '2026-5-30', DAY, 'date'), null)
})

test('boolean and string properties', () => {
  assert.equal(propertyScore(hasSso, true, DAY, 'boolean'), 100)
  assert.equal(propertyScore(hasSso, false, DAY, 'boolean'), -100)
  assert.equal(propertyScore(country, 'US', DAY, 'string'), 100)
  assert.equal(propertyScore(country, 'DE', DAY, 'string'), 50)
  assert.equal(propertyScore(country, 'FR', DAY, 'string'), -100) // default
  assert.equal(propertyScore(country, 'toString', DAY, 'string'), -100) // not Object.prototype's
  const noDefault: Rule = { codename: 'country', weight: 1, values: { US: 100 } }
  assert.equal(propertyScore(noDefault, 'FR', DAY, 'string'), 0)
})

test('missing values and values of the wrong JSON type give null', () => {
  assert.equal(propertyScore(logins, null, DAY, 'number'), null)
  assert.equal(propertyScore(logins, undefined, DAY, 'number'), null)
  assert.equal(propertyScore(logins, '30', DAY, 'number'), null)
  assert.equal(propertyScore(hasSso, 'true', DAY, 'boolean'), null)
  assert.equal(propertyScore(country, 1, DAY, 'string'), null)
  assert.equal(propertyScore(renewal, 90, DAY, 'date'), null)
})

test('weighted score: sum(w * p) / sum(w) with contributions', () => {
  const all = score(engagement, { logins: 30, open_tickets: 2, renewal_date: '2026-05-30' })
  assert.equal(all.score, 40) // (50 * 50 + 25 * 60 + 25 * 0) / 100
  assert.deepEqual(all.contributions, [
    { codename: 'logins', contribution: 25 },
    { codename: 'open_tickets', contribution: 15 },
    { codename: 'renewal_date', contribution: 0 },
  ])
  const f = score(fit, { country: 'DE', has_sso: false })
  assert.equal(f.score, -25) // (50 * 50 + 50 * -100) / 100
})

test('weighted score: missing values are left out and the weights renormalised', () => {
  const some = score(engagement, { open_tickets: 2, renewal_date: '2026-05-30', logins: 'n/a' })
  assert.equal(some.score, 30) // (25 * 60 + 25 * 0) / 50
  assert.deepEqual(some.contributions, [
    { codename: 'open_tickets', contribution: 30 },
    { codename: 'renewal_date', contribution: 0 },
  ])
  assert.deepEqual(score(engagement, {}), { score: null, contributions: [] })
  assert.deepEqual(score([], { logins: 3 }), { score: null, contributions: [] })
})

test('weighted score rounds half away from zero', () => {
  const rules: Rule[] = [
    { codename: 'logins', weight: 1, bad: 0, good: 200 },
    { codename: 'open_tickets', weight: 1, bad: 0, good: 200 },
  ]
  assert.equal(score(rules, { logins: 105, open_tickets: 100 }).score, 3) // (5 + 0) / 2 = 2.5
  // -2.5; Math.round gives -2
  assert.equal(score(rules, { logins: 95, open_tickets: 100 }).score, -3)
})

test('roundHalfAway: ties away from zero, float noise up to 1e-9 absorbed, no -0', () => {
  assert.equal(roundHalfAway(2.5), 3)
  assert.equal(roundHalfAway(-2.5), -3)
  assert.equal(roundHalfAway(2.49), 2)
  assert.equal(roundHalfAway(2.4999999999999996), 3)
  assert.equal(roundHalfAway(2.4999999), 2) // a real difference, not noise
  assert.equal(roundHalfAway((0.1 + 0.2) * 10 - 0.5), 3) // 2.5000000000000004 in doubles
  assert.ok(Object.is(roundHalfAway(-0.4), 0))
  fc.assert(
    fc.property(fc.double({ min: -1e6, max: 1e6, noNaN: true }), (x) =>
      Object.is(roundHalfAway(-x), -roundHalfAway(x) || 0),
    ),
  )
})

test('weighted score stays within -100..100 and is null only without values', () => {
  const value = fc.oneof(
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constant(undefined),
  )
  fc.assert(
    fc.property(value, value, value, (a, b, c) => {
      const { score: s } = score(engagement, {
        logins: a,
        open_tickets: b,
        renewal_date: c === undefined ? c : '2026-04-01',
      })
      return a === undefined && b === undefined && c === undefined
        ? s === null
        : s !== null && s >= -100 && s <= 100
    }),
  )
})

test('churn risk', () => {
  // 50 - 0.35 * 40 - 0.15 * -25 - 0.3 * 10 + 20 * 45 / 90 = 46.75
  assert.equal(churnRisk(40, -25, 10, 45), 47)
  assert.equal(churnRisk(null, 50, 10, 3), null)
  assert.equal(churnRisk(0, null, null, 0), 50)
  assert.equal(churnRisk(0, null, null, 200), 70) // days capped at 90
  assert.equal(churnRisk(0, null, null, -30), 50) // last seen in the future: as if today
  assert.equal(churnRisk(0, 0, 300, 0), 20) // difference clamped to 100
  assert.equal(churnRisk(10, 0, 0, 0), 47) // 46.5
  assert.equal(churnRisk(-100, -100, -100, 90), 100) // 150
  assert.equal(churnRisk(100, 100, 100, 0), 0) // -30
})

test('upsell score', () => {
  assert.equal(upsellScore(40, -25, 10), 59) // 50 + 12 - 5 + 1.5 = 58.5
  assert.equal(upsellScore(null, 100, 100), null)
  assert.equal(upsellScore(0, null, null), 50)
  assert.equal(upsellScore(100, 100, 100), 100) // 115
  assert.equal(upsellScore(-100, -100, -300), 0) // difference clamped: 50 - 30 - 20 - 15 = -15
})

test('history: last 15 records within the year before today, difference to the previous record', () => {
  const june = Array.from({ length: 20 }, (_, i) => ({
    date: `2026-06-${String(i + 1).padStart(2, '0')}`,
    score: i + 1,
  }))
  const records = [
    { date: '2026-06-25', score: null }, // not scored: ignored
    ...june.reverse(),
    { date: '2024-01-01', score: 10 },
  ]
  const summary = summarizeHistory(records, '2026-06-30')
  assert.equal(summary.last_seen, '2026-06-20')
  assert.equal(summary.engagementscore, 20)
  assert.equal(summary.engagementscore_difference, 1)
  const trend = summary.engagementscore_trend!
  assert.deepEqual(
    Object.keys(trend),
    june
      .slice(0, 15)
      .reverse()
      .map((r) => r.date),
  ) // 06-06 .. 06-20
  assert.equal(trend['2026-06-06'], 6)
  assert.equal(trend['2026-06-20'], 20)
})

test('history: the 365-day window and edge cases', () => {
  const summary = summarizeHistory(
    [
      { date: '2025-06-30', score: 10 }, // exactly 365 days before: outside
      { date: '2025-07-01', score: 30 },
      { date: '2026-06-30', score: 50 },
    ],
    '2026-06-30',
  )
  assert.deepEqual(summary, {
    last_seen: '2026-06-30',
    engagementscore: 50,
    engagementscore_difference: 20,
    engagementscore_trend: { '2025-07-01': 30, '2026-06-30': 50 },
  })
  assert.deepEqual(summarizeHistory([{ date: '2024-05-01', score: -7 }], '2026-06-30'), {
    last_seen: '2024-05-01',
    engagementscore: -7,
    engagementscore_difference: null,
    engagementscore_trend: null,
  })
  const none = {
    last_seen: null,
    engagementscore: null,
    engagementscore_difference: null,
    engagementscore_trend: null,
  }
  assert.deepEqual(summarizeHistory([], '2026-06-30'), none)
  assert.deepEqual(summarizeHistory([{ date: '2026-06-01', score: null }], '2026-06-30'), none)
})

test('explain: rounded contributions and the three strongest drivers each way', () => {
  const e = [
    { codename: 'a', contribution: -10.126 },
    { codename: 'b', contribution: 5.555 },
    { codename: 'c', contribution: -0.001 }, // rounds to 0: no driver
    { codename: 'd', contribution: 30 },
  ]
  const f = [
    { codename: 'e', contribution: -40 },
    { codename: 'f', contribution: -10.124 },
    { codename: 'g', contribution: 2 },
    { codename: 'h', contribution: -1 },
  ]
  const x = explain(e, f)
  assert.deepEqual(
    x.engagement.map((c) => c.contribution),
    [-10.13, 5.56, 0, 30],
  )
  assert.ok(Object.is(x.engagement[2].contribution, 0))
  assert.deepEqual(
    x.fit.map((c) => c.contribution),
    [-40, -10.12, 2, -1],
  )
  assert.deepEqual(x.risk_drivers, [
    { codename: 'e', score: 'fit', contribution: -40 },
    { codename: 'a', score: 'engagement', contribution: -10.13 },
    { codename: 'f', score: 'fit', contribution: -10.12 },
  ])
  assert.deepEqual(x.health_drivers, [
    { codename: 'd', score: 'engagement', contribution: 30 },
    { codename: 'b', score: 'engagement', contribution: 5.56 },
    { codename: 'g', score: 'fit', contribution: 2 },
  ])
  assert.deepEqual(explain([], []), {
    engagement: [],
    fit: [],
    risk_drivers: [],
    health_drivers: [],
  })
})

test('model schema accepts the documented example unchanged and an empty model', () => {
  assert.deepEqual(model, EXAMPLE_MODEL)
  assert.deepEqual(v.parse(ScoringModelSchema, {}), {})
})

test('model schema rejects bad shapes with their paths', () => {
  const rule = { codename: 'logins', weight: 1, bad: 0, good: 40 }
  const engagementOf = (...rules: unknown[]) => ({ customer: { engagement: rules } })
  assert.deepEqual(issuePaths(engagementOf({ ...rule, weight: 0 })), [
    '/customer/engagement/0/weight',
  ])
  assert.deepEqual(issuePaths(engagementOf({ ...rule, weight: -3 })), [
    '/customer/engagement/0/weight',
  ])
  assert.deepEqual(issuePaths(engagementOf(rule, { ...rule, good: 0 })), [
    '/customer/engagement/1/good',
  ])
  assert.deepEqual(issuePaths(engagementOf({ ...rule, codename: '' })), [
    '/customer/engagement/0/codename',
  ])
  assert.deepEqual(issuePaths(engagementOf({ codename: 'x', weight: 1, good: 'yes' })), [
    '/customer/engagement/0/bad',
    '/customer/engagement/0/good',
  ])
  assert.deepEqual(issuePaths(engagementOf({ ...rule, bad: 1e300 })), [
    '/customer/engagement/0/bad',
  ])
  // Two forms mixed in one rule.
  assert.deepEqual(issuePaths(engagementOf({ codename: 'x', weight: 1, good: true, bad: 0 })), [
    '/customer/engagement/0/bad',
  ])
  assert.deepEqual(issuePaths(engagementOf({ ...rule, values: { a: 1 } })), [
    '/customer/engagement/0/bad', // the first extra key
  ])
  assert.deepEqual(issuePaths(engagementOf('logins', null)), [
    '/customer/engagement/0',
    '/customer/engagement/1',
  ])
  assert.deepEqual(
    issuePaths({
      customer: {
        fit: [{ codename: 'c', weight: 1, values: { US: 101, DE: 1e-9 }, default: -101 }],
      },
    }),
    ['/customer/fit/0/values/US', '/customer/fit/0/values/DE', '/customer/fit/0/default'],
  )
  assert.deepEqual(issuePaths({ customer: { fit: [{ codename: 'c', weight: 1, default: 5 }] } }), [
    '/customer/fit/0/values',
  ])
  assert.deepEqual(issuePaths({ churn: { inactive_days: 0 } }), ['/churn/inactive_days'])
  assert.deepEqual(issuePaths({ churn: { inactive_days: 1.5 } }), ['/churn/inactive_days'])
  assert.deepEqual(issuePaths({ custmer: {} }), ['/custmer'])
  assert.deepEqual(issuePaths({ contact: { fit: [] } }), ['/contact/fit'])
})

test('hasCustomerModel needs a customer engagement or fit rule', () => {
  assert.equal(hasCustomerModel(model), true)
  assert.equal(hasCustomerModel({}), false)
  assert.equal(hasCustomerModel(null), false)
  assert.equal(hasCustomerModel({ customer: { engagement: [], fit: [] } }), false)
  assert.equal(hasCustomerModel({ contact: { engagement: [logins] } }), false)
  assert.equal(hasCustomerModel({ customer: { fit: [country] } }), true)
})

test('checkModelAgainstProperties: codenames of the entity and forms that fit the type', () => {
  const defs = {
    customer: Object.entries(TYPES).map(([codename, type]) => ({
      codename,
      kind: 'attribute' as const,
      type,
    })),
    contact: [{ codename: 'sessions', kind: 'metric' as const, type: 'number' as const }],
  }
  assert.deepEqual(checkModelAgainstProperties(model, defs), [])
  const wrong: ScoringModel = {
    customer: {
      engagement: [
        logins,
        { codename: 'sessions', weight: 1, bad: 0, good: 1 }, // a contact property
        { codename: 'renewal_date', weight: 1, good: true },
      ],
      fit: [
        { codename: 'country', weight: 1, bad: 0, good: 1 },
        { codename: 'has_sso', weight: 1, values: { yes: 100 } },
        { codename: 'logins', weight: 1, values: {} },
      ],
    },
    contact: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 1 }] },
  }
  assert.deepEqual(
    checkModelAgainstProperties(wrong, defs).map((p) => p.path),
    [
      '/customer/engagement/1/codename',
      '/customer/engagement/2',
      '/customer/fit/0',
      '/customer/fit/1',
      '/customer/fit/2',
      '/contact/engagement/0/codename',
    ],
  )
  for (const problem of checkModelAgainstProperties(wrong, defs))
    assert.ok(problem.message.length > 0)
})

const refs = {
  metric: (key: string) => `s."values" -> ${key}`,
  attribute: (key: string) => `c.attributes -> ${key}`,
  raw: (name: string) => `raw.${name}`,
  value: (name: string) => `sv.${name}`,
  column: (name: string) => `rec.${name}`,
  date: 'sv.date',
  isMetric: (codename: string) => codename !== 'plan_zq',
}

test('weightedScoreSql binds every codename and rule number as a parameter', () => {
  const rules: Rule[] = [
    { codename: 'logins_zq', weight: 37, bad: 1234.5, good: 777 },
    { codename: "it's_zq", weight: 0.375, bad: 11, good: 999 },
    { codename: 'sso_zq', weight: 53, good: true },
    { codename: 'plan_zq', weight: 61, values: { Zeta: 42, "O'Brien": -17 }, default: -19 },
  ]
  const types: Record<string, PropertyType> = {
    logins_zq: 'number',
    "it's_zq": 'date',
    sso_zq: 'boolean',
    plan_zq: 'string',
  }
  const { columns, values, sums, score, scored, params } = weightedScoreSql(
    rules,
    (c) => types[c],
    refs,
    4,
    'sc',
  )
  const text = [
    ...columns.raw,
    ...columns.typed,
    ...values.raw,
    ...values.typed,
    ...sums,
    score,
  ].join(', ')
  const withoutPlaceholders = text.replace(/\$\d+/g, '$')
  for (const literal of [
    '_zq',
    'Zeta',
    'Brien',
    'true',
    '1234',
    '777',
    '37',
    '375',
    '11',
    '999',
    '53',
    '42',
    '17',
    '19',
    '61',
  ]) {
    assert.ok(!withoutPlaceholders.includes(literal), `${literal} appears in the SQL text`)
  }
  for (const value of [
    'logins_zq',
    "it's_zq",
    37,
    1234.5,
    777,
    0.375,
    11,
    999,
    true,
    53,
    61,
    -19,
  ]) {
    assert.ok(params.includes(value), `${value} is not a parameter`)
  }
  assert.ok(
    params.includes(JSON.stringify({ Zeta: 42, "O'Brien": -17 })),
    'the values map is a parameter',
  )
  const numbers = [...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]))
  assert.deepEqual(
    [...new Set(numbers)].sort((a, b) => a - b),
    params.map((_, i) => i + 4),
  )
  // What the SQL computes is checked against weightedScore in scoring-sql.test.ts; here, how
  // it reads the data. The one attribute (plan_zq) is read once per record, in the record-level
  // columns; each metric once per snapshot, in the scan's raw values; the typed levels and the sums
  // read no stored jsonb, only the level below by name.
  const reads = (fragments: string[], ref: string) => fragments.join('\n').split(ref).length - 1
  assert.equal(reads(columns.raw, 'c.attributes -> '), 1)
  assert.equal(reads(values.raw, 's."values" -> '), 3)
  assert.equal(reads([text], 'c.attributes -> ') + reads([text], 's."values" -> '), 4)
  const named = (fragments: string[]) => fragments.map((f) => f.replace(/.* AS /, ''))
  assert.deepEqual(named(columns.raw), ['sc_j3'])
  assert.deepEqual(named(columns.typed), ['sc_v3'])
  assert.deepEqual(named(values.raw), ['sc_j0', 'sc_j1', 'sc_j2'])
  assert.deepEqual(named(values.typed), ['sc_v0', 'sc_v1', 'sc_v2'])
  assert.deepEqual(named(sums), ['sc_t', 'sc_tw'])
  const stored = (f: string) => f.includes('c.attributes') || f.includes('s."values"')
  for (const typed of [...columns.typed, ...values.typed])
    assert.ok(!stored(typed) && typed.includes('raw.sc_j'), typed)
  for (const level of [...sums, score, scored])
    assert.ok(!stored(level) && !level.includes('raw.'), level)
  assert.ok(scored.includes('sc_tw') && score.includes('sc_t'))
})

test('weightedScoreSql without rules is a NULL integer', () => {
  assert.deepEqual(weightedScoreSql([], typeOf, refs, 1, 'sc'), {
    columns: { raw: [], typed: [] },
    values: { raw: [], typed: [] },
    sums: [],
    score: 'NULL::integer',
    scored: 'false',
    params: [],
  })
})
