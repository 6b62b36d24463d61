import type { PropertyType } from '../../property.ts'
import { isBooleanRule, isValuesRule, type Rule } from './model.ts'
import { ROUND_NOISE } from './score.ts'
import { sqlDateOrNull } from '../../dates.ts'
import { sqlDoubleOrNull } from '../../values.ts'

// Compiles scoring rules into PostgreSQL expressions so that all snapshots and records of an
// account can be scored in a few set-based statements (scoring/batch.ts): engagement per
// snapshot and fit per record from the same weightedScoreSql with different refs, churn risk and
// upsell from the stored scores. They must give exactly what score.ts gives, so every step is the
// same float8 operation in the same order (JS numbers are IEEE doubles like float8, and rule
// numbers reach PostgreSQL as their shortest round-trip text), a value of the wrong JSON type
// counts as missing, and results are rounded by roundSql, which roundHalfAway mirrors.
// test/scoring-sql.test.ts feeds the same generated cases to both through a real PostgreSQL.

export interface SqlRefs {
  /**
   * jsonb value of a metric in the scored row, read in `values.raw`; `key` is SQL of type text (a
   * placeholder), e.g. (key) => `s."values" -> ${key}`.
   */
  metric: (key: string) => string
  /**
   * jsonb value of one of the record's current attributes, keyed the same way, read in
   * `columns.raw`.
   */
  attribute: (key: string) => string
  /** How the level of `typed` reads an item of `raw` by its name. */
  raw: (name: string) => string
  /** How the level of `sums` reads an item of `values` by its name. */
  value: (name: string) => string
  /** How the level of `sums` reads an item of `columns` by its name. */
  column: (name: string) => string
  /** The scoring date at the level of `sums`: the snapshot's date for engagement, today for fit. */
  date: string
  isMetric: (codename: string) => boolean
}

// roundHalfAway of score.ts; `x` is a float8 expression (written twice: keep it a cheap one).
const roundSql = (x: string) =>
  `(sign(${x}) * floor(abs(${x}) + 0.5::float8 + ${ROUND_NOISE}::float8))::integer`

// What a rule binds: codenames, weights, bounds and values maps (as JSON text).
type SqlParam = string | number | boolean
type Bind = (value: SqlParam, type: 'text' | 'float8' | 'boolean') => string

// The jsonb value `x` as the rule's form reads it (float8, boolean, text or date), NULL when it is
// absent or of another JSON type. `tolerant`: also NULL for a number no float8 can hold (stored
// before the one value rule, values.ts), which the plain cast raises on; its range check costs
// more than the cast, so batch.ts asks for it only for a batch that raised.
const typedSql = (rule: Rule, type: PropertyType, x: string, tolerant: boolean): string => {
  const str = `(${x} #>> '{}')`
  const when = (jsonType: string, value: string) =>
    `CASE WHEN jsonb_typeof(${x}) = '${jsonType}' THEN ${value} END`
  if (isValuesRule(rule)) return when('string', str)
  if (isBooleanRule(rule)) return when('boolean', `${x}::boolean`)
  if (type !== 'date')
    return when(
      'number',
      tolerant ? `(${sqlDoubleOrNull(`${x}::numeric`)})::float8` : `${x}::float8`,
    )
  return when('string', sqlDateOrNull(str))
}

// A typed value as the score reads it: a date becomes whole days from the scoring date.
const valueSql = (type: PropertyType, rule: Rule, typed: string, date: string) =>
  type === 'date' && !isValuesRule(rule) && !isBooleanRule(rule)
    ? `(${typed} - (${date})::date)::float8`
    : typed

// The property score of value column `v`; the branches are those of propertyScore, in its order.
const scoreSql = (rule: Rule, v: string, bind: Bind): string => {
  if (isValuesRule(rule)) {
    // The map travels as text: postgres.js would JSON-encode a jsonb parameter a second time.
    const values = `${bind(JSON.stringify(rule.values), 'text')}::jsonb`
    return (
      `CASE WHEN ${v} IS NULL THEN NULL ELSE coalesce((${values} -> ${v})::float8, ` +
      `${bind(rule.default ?? 0, 'float8')}) END`
    )
  }
  if (isBooleanRule(rule))
    return `CASE WHEN ${v} IS NULL THEN NULL WHEN ${v} = ${bind(rule.good, 'boolean')} THEN 100 ELSE -100 END`
  const bad = bind(rule.bad, 'float8')
  const good = bind(rule.good, 'float8')
  const span = rule.good - rule.bad
  const [pastGood, pastBad] = span > 0 ? ['>=', '<='] : ['<=', '>=']
  // Separate WHENs, not OR: CASE is the one construct whose evaluation order PostgreSQL
  // guarantees, and abs(...) * 1e20 overflows for a value far past `bad`.
  return (
    `CASE WHEN ${v} IS NULL THEN NULL` +
    ` WHEN ${v} ${pastGood} ${good} THEN 100` +
    ` WHEN ${v} ${pastBad} ${bad} THEN -100` +
    ` WHEN abs(${v} - ${bad}) * 1e20::float8 < ${bind(Math.abs(span), 'float8')} THEN -100` +
    ` ELSE greatest(-100, least(100, -100 + 200 * (${v} - ${bad}) / ${bind(span, 'float8')})) END`
  )
}

// Select-list items of two levels: the jsonb of each property a rule reads (`raw`), then over
// them its value as the rule reads it (`typed`). A typed value looks at its jsonb several times
// (its JSON type, then the value), and a lookup in a jsonb object copies the object first.
interface Levels {
  raw: string[]
  typed: string[]
}

interface ScoreSql {
  /** The record's attributes: selected once per record, not per snapshot. */
  columns: Levels
  /** The row's metrics: selected in the scan of the scored rows. */
  values: Levels
  /**
   * Select-list items `<alias>_t` and `<alias>_tw`, the weighted sum and the weight of the values
   * present, over `values` and `columns`.
   */
  sums: string[]
  /** The integer score over the sums (by their names), NULL when no rule has a value. */
  score: string
  /** True when some rule has a value, over the sums: the score is not NULL. */
  scored: string
  params: SqlParam[]
}

/**
 * Weighted score (engagement of a snapshot, fit of a record) of each row of a query, in four
 * levels the caller nests with OFFSET 0 so that PostgreSQL does not flatten them: the jsonb values
 * and the typed values over them (`columns` once per record, `values` in the scan of the rows),
 * the sums over those, the score over the sums. Each value is then read once, each property score
 * computed once into the sums, and the sums once into the score; flattened, every use would repeat
 * the jsonb lookups and date checks of a value. The levels are plain subqueries, not LATERAL
 * joins, whose rescans cost more per row than the scoring itself.
 * Everything taken from the model is a bound parameter, never spliced into the text: codenames and
 * the values map are account input. Placeholders are numbered from `paramStart`; `params` holds
 * their values in order. `alias` prefixes the names of the items. `tolerant`: see typedSql.
 */
export const weightedScoreSql = (
  rules: readonly Rule[],
  typeOf: (codename: string) => PropertyType,
  refs: SqlRefs,
  paramStart: number,
  alias: string,
  tolerant = false,
): ScoreSql => {
  if (rules.length === 0) {
    return {
      columns: { raw: [], typed: [] },
      values: { raw: [], typed: [] },
      sums: [],
      score: 'NULL::integer',
      scored: 'false',
      params: [],
    }
  }
  const params: SqlParam[] = []
  const bind: Bind = (value, type) => {
    params.push(value)
    return `$${paramStart + params.length - 1}::${type}`
  }
  const columns: Levels = { raw: [], typed: [] }
  const values: Levels = { raw: [], typed: [] }
  // Each rule's typed value as the sums level reads it.
  const typed = rules.map((rule, i) => {
    const key = bind(rule.codename, 'text')
    const [raw, name] = [`${alias}_j${i}`, `${alias}_v${i}`]
    const metric = refs.isMetric(rule.codename)
    const levels = metric ? values : columns
    levels.raw.push(`(${metric ? refs.metric(key) : refs.attribute(key)}) AS ${raw}`)
    levels.typed.push(
      `${typedSql(rule, typeOf(rule.codename), refs.raw(raw), tolerant)} AS ${name}`,
    )
    return metric ? refs.value(name) : refs.column(name)
  })
  // A property score is NULL exactly when its value is, so the weights count the values present.
  // Sums start from 0 and add 0 for a missing value, which leaves a float sum unchanged, so they
  // equal weightedScore's sums over the present values only.
  const weights = rules.map((rule) => bind(rule.weight, 'float8'))
  const total = rules
    .map(
      (rule, i) =>
        ` + coalesce(${weights[i]} * ` +
        `${scoreSql(rule, valueSql(typeOf(rule.codename), rule, typed[i], refs.date), bind)}, 0)`,
    )
    .join('')
  const totalWeight = typed
    .map((v, i) => ` + CASE WHEN ${v} IS NULL THEN 0 ELSE ${weights[i]} END`)
    .join('')
  const [t, tw] = [`${alias}_t`, `${alias}_tw`]
  return {
    columns,
    values,
    sums: [`(0${total}) AS ${t}`, `(0${totalWeight}) AS ${tw}`],
    score: `CASE WHEN ${tw} > 0 THEN ${roundSql(`(${t} / ${tw})`)} END`,
    scored: `${tw} > 0`,
    params,
  }
}

// churnRisk and upsellScore of score.ts over SQL expressions: e, f, d integer scores (NULL when
// missing), daysSinceLastSeen an integer. The float8 casts keep PostgreSQL from doing numeric
// arithmetic with the literals, which would round differently from JS.
const trendInputsSql = (f: string, d: string) => ({
  f: `coalesce(${f}, 0)`,
  d: `greatest(-100, least(100, coalesce(${d}, 0)))`,
})
const percentSql = (e: string, x: string) =>
  `CASE WHEN ${e} IS NULL THEN NULL ELSE greatest(0, least(100, ${roundSql(`(${x})`)})) END`

export const churnRiskSql = (
  e: string,
  f: string,
  d: string,
  daysSinceLastSeen: string,
): string => {
  const x = trendInputsSql(f, d)
  const s = `greatest(0, least(${daysSinceLastSeen}, 90))`
  return percentSql(
    e,
    `50 - 0.35::float8 * ${e} - 0.15::float8 * ${x.f} - 0.3::float8 * ${x.d} + (20 * ${s})::float8 / 90`,
  )
}

export const upsellScoreSql = (e: string, f: string, d: string): string => {
  const x = trendInputsSql(f, d)
  return percentSql(e, `50 + 0.3::float8 * ${e} + 0.2::float8 * ${x.f} + 0.15::float8 * ${x.d}`)
}
