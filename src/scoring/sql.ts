import { isBooleanRule, isValuesRule, type PropertyType, type Rule } from './model.ts'
import { DATE_PATTERN, ROUND_NOISE } from './score.ts'

// Compiles scoring rules into PostgreSQL expressions so that all snapshots and records of an
// account can be scored in a few set-based statements (src/jobs/score-records.ts): engagement per
// snapshot and fit per record from the same weightedScoreSql with different refs, churn risk and
// upsell from the stored scores. They must give exactly what score.ts gives, so every step is the
// same float8 operation in the same order (JS numbers are IEEE doubles like float8, and rule
// numbers reach PostgreSQL as their shortest round-trip text), a value of the wrong JSON type
// counts as missing, and results are rounded by roundSql, which roundHalfAway mirrors.
// test/scoring-sql.test.ts feeds the same generated cases to both through a real PostgreSQL.

export interface SqlRefs {
  /** jsonb value of a metric in the scored row; `key` is SQL of type text (a placeholder), e.g. (key) => `s."values" -> ${key}`. */
  metric: (key: string) => string
  /** jsonb value of one of the record's current attributes, keyed the same way, read in `columns`. */
  attribute: (key: string) => string
  /** How the scored row reads a column of `columns` by its name. */
  column: (name: string) => string
  /** SQL expression of the scoring date: the snapshot's date for engagement, today for fit. */
  date: string
  isMetric: (codename: string) => boolean
}

// roundHalfAway of score.ts; `x` is a float8 expression (written twice: keep it a cheap one).
const roundSql = (x: string) => `(sign(${x}) * floor(abs(${x}) + 0.5::float8 + ${ROUND_NOISE}::float8))::integer`

type Bind = (value: unknown, type: 'text' | 'float8' | 'boolean') => string

// The jsonb value `x` as the rule's form reads it (float8, boolean, text or date), NULL when it is
// absent or of another JSON type.
const typedSql = (rule: Rule, type: PropertyType, x: string): string => {
  const str = `(${x} #>> '{}')`
  const when = (jsonType: string, value: string) => `CASE WHEN jsonb_typeof(${x}) = '${jsonType}' THEN ${value} END`
  if (isValuesRule(rule)) return when('string', str)
  if (isBooleanRule(rule)) return when('boolean', `${x}::boolean`)
  if (type !== 'date') return when('number', `${x}::float8`)
  // The pattern first: pg_input_is_valid alone would also take forms like 'today' or '1/2/2026'.
  return `CASE WHEN jsonb_typeof(${x}) = 'string' AND ${str} ~ '${DATE_PATTERN}' AND pg_input_is_valid(${str}, 'date') THEN ${str}::date END`
}

// A typed value as the score reads it: a date becomes whole days from the scoring date.
const valueSql = (type: PropertyType, rule: Rule, typed: string, date: string) =>
  type === 'date' && !isValuesRule(rule) && !isBooleanRule(rule) ? `(${typed} - (${date})::date)::float8` : typed

// The property score of value column `v`; the branches are those of propertyScore, in its order.
const scoreSql = (rule: Rule, v: string, bind: Bind): string => {
  if (isValuesRule(rule)) {
    // The map travels as text: postgres.js would JSON-encode a jsonb parameter a second time.
    const values = `${bind(JSON.stringify(rule.values), 'text')}::jsonb`
    return `CASE WHEN ${v} IS NULL THEN NULL ELSE coalesce((${values} -> ${v})::float8, ${bind(rule.default ?? 0, 'float8')}) END`
  }
  if (isBooleanRule(rule)) return `CASE WHEN ${v} IS NULL THEN NULL WHEN ${v} = ${bind(rule.good, 'boolean')} THEN 100 ELSE -100 END`
  const bad = bind(rule.bad, 'float8')
  const good = bind(rule.good, 'float8')
  const span = rule.good - rule.bad
  const [pastGood, pastBad] = span > 0 ? ['>=', '<='] : ['<=', '>=']
  // Separate WHENs, not OR: CASE is the one construct whose evaluation order PostgreSQL
  // guarantees, and abs(...) * 1e20 overflows for a value far past `bad`.
  return `CASE WHEN ${v} IS NULL THEN NULL`
    + ` WHEN ${v} ${pastGood} ${good} THEN 100`
    + ` WHEN ${v} ${pastBad} ${bad} THEN -100`
    + ` WHEN abs(${v} - ${bad}) * 1e20::float8 < ${bind(Math.abs(span), 'float8')} THEN -100`
    + ` ELSE greatest(-100, least(100, -100 + 200 * (${v} - ${bad}) / ${bind(span, 'float8')})) END`
}

export interface ScoreSql {
  /** Select-list items that read the record's attributes, computed once per record (not per snapshot). */
  columns: string[]
  /** A LATERAL join to add to the FROM clause after the tables the refs name ('' without rules). */
  join: string
  /** The integer score expression over that join, NULL when no rule has a value. */
  score: string
  params: unknown[]
}

/**
 * Weighted score (engagement of a snapshot, fit of a record) of each row of a query.
 * Everything taken from the model is a bound parameter, never spliced into the text: codenames and
 * the values map are account input. Placeholders are numbered from `paramStart`; `params` holds
 * their values in order. `alias` names the join.
 *
 * The record's attribute values are parsed once per record by `columns`, which the caller selects
 * in a record-level subquery and `refs.column` reads back: a record has a dozen snapshots, and a
 * date attribute's checks cost more than the rest of a snapshot's score.
 * Each row's values are read once, in the inner level of the join, its weighted sums computed
 * over them in the next, and its score from the sums in the outer level: OFFSET 0 keeps
 * PostgreSQL from flattening the levels, which would copy each value's jsonb lookups and date
 * checks into every use of it, and the sums into every use of them. (A scalar subquery instead measured ~20 µs of subplan
 * overhead per row, several times the work itself.)
 */
export const weightedScoreSql = (
  rules: readonly Rule[],
  typeOf: (codename: string) => PropertyType,
  refs: SqlRefs,
  paramStart: number,
  alias: string,
): ScoreSql => {
  if (rules.length === 0) return { columns: [], join: '', score: 'NULL::integer', params: [] }
  const params: unknown[] = []
  const bind: Bind = (value, type) => {
    params.push(value)
    return `$${paramStart + params.length - 1}::${type}`
  }
  const columns: string[] = []
  const values = rules.map((rule, i) => {
    const type = typeOf(rule.codename)
    const key = bind(rule.codename, 'text')
    if (refs.isMetric(rule.codename)) return `${valueSql(type, rule, typedSql(rule, type, `(${refs.metric(key)})`), refs.date)} AS v${i}`
    columns.push(`${typedSql(rule, type, `(${refs.attribute(key)})`)} AS ${alias}_a${i}`)
    return `${valueSql(type, rule, refs.column(`${alias}_a${i}`), refs.date)} AS v${i}`
  })
  // Each property score once, straight into the sums; a property score is NULL exactly when its
  // value is, so the weights count the values present. Sums start from 0 and add 0 for a missing
  // value, which leaves a float sum unchanged, so they equal weightedScore's sums over the present
  // values only.
  const weights = rules.map((rule) => bind(rule.weight, 'float8'))
  const v = (i: number) => `${alias}_values.v${i}`
  const total = `(0${rules.map((rule, i) => ` + coalesce(${weights[i]} * ${scoreSql(rule, v(i), bind)}, 0)`).join('')})`
  const totalWeight = `(0${weights.map((w, i) => ` + CASE WHEN ${v(i)} IS NULL THEN 0 ELSE ${w} END`).join('')})`
  const score = `CASE WHEN ${alias}_sums.tw > 0 THEN ${roundSql(`(${alias}_sums.t / ${alias}_sums.tw)`)} END`
  return {
    columns,
    join: `CROSS JOIN LATERAL (SELECT ${score} AS score FROM (SELECT ${total} AS t, ${totalWeight} AS tw FROM (SELECT ${values.join(', ')} OFFSET 0) AS ${alias}_values OFFSET 0) AS ${alias}_sums OFFSET 0) AS ${alias}`,
    score: `${alias}.score`,
    params,
  }
}

// churnRisk and upsellScore of score.ts over SQL expressions: e, f, d integer scores (NULL when
// missing), daysSinceLastSeen an integer. The float8 casts keep PostgreSQL from doing numeric
// arithmetic with the literals, which would round differently from JS.
const trendInputsSql = (f: string, d: string) => ({ f: `coalesce(${f}, 0)`, d: `greatest(-100, least(100, coalesce(${d}, 0)))` })
const percentSql = (e: string, x: string) =>
  `CASE WHEN ${e} IS NULL THEN NULL ELSE greatest(0, least(100, ${roundSql(`(${x})`)})) END`

export const churnRiskSql = (e: string, f: string, d: string, daysSinceLastSeen: string): string => {
  const x = trendInputsSql(f, d)
  const s = `greatest(0, least(${daysSinceLastSeen}, 90))`
  return percentSql(e, `50 - 0.35::float8 * ${e} - 0.15::float8 * ${x.f} - 0.3::float8 * ${x.d} + (20 * ${s})::float8 / 90`)
}

export const upsellScoreSql = (e: string, f: string, d: string): string => {
  const x = trendInputsSql(f, d)
  return percentSql(e, `50 + 0.3::float8 * ${e} + 0.2::float8 * ${x.f} + 0.15::float8 * ${x.d}`)
}
