// SQL of search criteria: each criterion becomes a condition on the searched record `r`. Every
// user-supplied string travels as a bound parameter with an explicit cast, so the SQL text is
// built only from the constants in this file.
import { TABLES } from '../db/tables.ts'
import { sqlDateOrNull } from '../dates.ts'
import type { Lookups } from './criteria.ts'
import type { Criterion, Entity, Field, PositiveOp, Scalar, Tree, ValueType } from './fields.ts'
import { FRACTIONS, isNode, NUMBER_RANGES, PAST_DAYS, valueTypeOf } from './fields.ts'

type BaseType =
  | 'text'
  | 'numeric'
  | 'boolean'
  | 'date'
  | 'timestamptz'
  | 'integer'
  | 'bigint'
  | 'jsonb'
export type SqlType = BaseType | `${BaseType}[]`

export interface Ctx {
  // Appends a parameter and returns its typed placeholder, e.g. `$3::text::numeric`.
  bind: (value: string, type: SqlType) => string
  account: string
  today: () => string
  entity: Entity
  lookups: Partial<Lookups>
}

export const SQL_TYPES: Record<ValueType, BaseType> = {
  string: 'text',
  number: 'numeric',
  boolean: 'boolean',
  date: 'date',
}

// Canonical text of a parsed operand; numbers go through String(), the double the operand
// was parsed to.
function bindScalar(ctx: Ctx, value: Scalar, type: ValueType): string {
  return ctx.bind(String(value), SQL_TYPES[type])
}

// A custom property's value in a jsonb bag, typed, or null when absent or of another JSON type.
const JSON_VALUE_SQL: Record<ValueType, (bag: string, key: string) => string> = {
  string: (bag, key) =>
    `case when jsonb_typeof(${bag} -> ${key}) = 'string' then ${bag} ->> ${key} end`,
  number: (bag, key) =>
    `case when jsonb_typeof(${bag} -> ${key}) = 'number' then (${bag} ->> ${key})::numeric end`,
  boolean: (bag, key) =>
    `case when jsonb_typeof(${bag} -> ${key}) = 'boolean' then (${bag} ->> ${key})::boolean end`,
  date: (bag, key) =>
    `case when jsonb_typeof(${bag} -> ${key}) = 'string' then ${sqlDateOrNull(`(${bag} ->> ${key})`)} end`,
}

// A customer's engagement score as of `day` (SQL date): its history's latest entry dated on or
// before it, found by width_bucket's binary search of the sorted history_dates (the index 0 before
// the first entry reads null, as does an empty history). `h` is the customer's customer_scores row.
const scoreOnSql = (h: string, day: string) =>
  `${h}.history_scores[width_bucket(${day}, ${h}.history_dates)]`

// Core scalar fields; `r` is the searched record, `h` its scores, `oc` a contact's owning customer.
// A function reads today's date, once the search's own (ctx.today()).
type CoreSql = string | ((ctx: Ctx) => string)
const pastScore = (days: number) => (ctx: Ctx) => scoreOnSql('h', `${ctx.today()} - ${days}`)
const CORE_SQL: ReadonlyMap<string, CoreSql> = new Map<string, CoreSql>([
  ['external_id', 'r.external_id'],
  ['name', 'r.name'],
  ['is_churned', 'r.is_churned'],
  ['fitscore', 'h.fitscore'],
  ['engagementscore', 'h.engagementscore'],
  ['engagementscore_difference', 'h.engagementscore_difference'],
  ['churn_risk', 'h.churn_risk'],
  ['upsell_score', 'h.upsell_score'],
  ['churn_probability', 'h.churn_probability'],
  ['last_seen', 'h.last_seen'],
  ...PAST_DAYS.flatMap((n): [string, CoreSql][] => [
    [`engagementscore_${n}d_ago`, pastScore(n)],
    [`engagementscore_change_${n}d`, (ctx) => `(h.engagementscore - ${pastScore(n)(ctx)})`],
  ]),
  // Set on a churn, cleared on a reactivation (sql/036).
  ['churned_date', 'r.churned_date'],
  // Each change of is_churned is kept in customer_churn_events (sql/036), a reactivation dated the
  // day it was made; by primary key. The bound account, not r's: Citus routes a correlated subquery
  // to one shard only when it names the account itself.
  [
    'reactivated_date',
    (ctx) =>
      `(select max(e.day) from customer_churn_events e where e.account_id = ${ctx.account} ` +
      'and e.customer_id = r.service_id and not e.churned)',
  ],
  ['customer_external_id', 'oc.external_id'],
])

// A core field's SQL (none for the timestamps, which only sort).
export function coreSql(name: string, ctx: Ctx): string | undefined {
  const sql = CORE_SQL.get(name)
  return typeof sql === 'function' ? sql(ctx) : sql
}

// A field's value of the record `r` (and its scores `h`), typed; null when it has none.
export function fieldSql(field: Field, ctx: Ctx): string {
  if (field.source === 'core') return coreSql(field.name, ctx)!
  const bag = field.source === 'attribute' ? 'r.attributes' : 'r.metrics'
  return `(${JSON_VALUE_SQL[field.type](bag, ctx.bind(field.name, 'text'))})`
}

// A list of values as one array literal, bound as a single parameter of `type`[]: an IN costs one
// parameter and one hashed lookup per row however many values it lists, where a list of N
// parameters (or N ORed tests) costs the planner and every row N comparisons.
export function bindList(ctx: Ctx, values: readonly string[], type: BaseType): string {
  const literal = `{${values.map((x) => `"${x.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`
  return ctx.bind(literal, `${type}[]`)
}

type ScalarSql = (v: string, operands: Scalar[], type: ValueType, ctx: Ctx) => string

const SCALAR_SQL: Record<PositiveOp, ScalarSql> = {
  IN: (v, xs, t, ctx) =>
    xs.length === 1
      ? `${v} = ${bindScalar(ctx, xs[0], t)}`
      : `${v} = any(${bindList(ctx, xs.map(String), SQL_TYPES[t])})`,
  LT: (v, [x], t, ctx) => `${v} < ${bindScalar(ctx, x, t)}`,
  LTE: (v, [x], t, ctx) => `${v} <= ${bindScalar(ctx, x, t)}`,
  GT: (v, [x], t, ctx) => `${v} > ${bindScalar(ctx, x, t)}`,
  GTE: (v, [x], t, ctx) => `${v} >= ${bindScalar(ctx, x, t)}`,
  // LIKE rather than strpos so that a trigram index on lower(name) can serve it; the value's
  // \, % and _ are escaped in SQL (folded to a constant at planning) so they stay literal.
  LIKE: (v, [x], _t, ctx) => {
    const escaped =
      `replace(replace(replace(lower(${ctx.bind(String(x), 'text')}), '\\', '\\\\'), ` +
      `'%', '\\%'), '_', '\\_')`
    return `lower(${v}) like ('%' || ${escaped} || '%')`
  },
  GTD: (v, [n], _t, ctx) => `${v} < ${ctx.today()} - ${ctx.bind(String(n), 'integer')}`,
  LTD: (v, [n], _t, ctx) =>
    `(${v} > ${ctx.today()} - ${ctx.bind(String(n), 'integer')} and ${v} <= ${ctx.today()})`,
  KNOWN: (v, _xs, t) => (t === 'string' ? `(${v} is not null and ${v} <> '')` : `${v} is not null`),
}

// The user or tag ids the operands name, resolved by the caller; none matches nothing.
function resolvedIds(ids: ReadonlyMap<string, number> | undefined, xs: Scalar[]): number[] {
  if (!ids) throw new Error('owner and tags filters need SearchInput.lookups')
  return [...new Set(xs.flatMap((x) => ids.get(String(x)) ?? []))]
}

// Ids as constants (bound, folded at planning) let the planner use the column statistics of
// owner_user_id and tag_id, and a single owner walk (account_id, owner_user_id, external_id) in
// external-id order.
function idMatch(column: string, ids: number[], ctx: Ctx): string {
  if (ids.length === 0) return 'false'
  if (ids.length === 1) return `${column} = ${ctx.bind(String(ids[0]), 'bigint')}`
  return `${column} = any(${ctx.bind(`{${ids.join(',')}}`, 'bigint[]')})`
}

// owner (like tags) allows only IN (EQ) and KNOWN as positive operators.
type SetSql = { IN: (xs: Scalar[], ctx: Ctx) => string; KNOWN: (ctx: Ctx) => string }

const OWNER_SQL: SetSql = {
  IN: (xs, ctx) => idMatch('r.owner_user_id', resolvedIds(ctx.lookups.users, xs), ctx),
  // owner_user_id has no foreign key: an owner is known when the user row exists.
  KNOWN: (ctx) =>
    `exists (select 1 from users u where u.account_id = ${ctx.account} and u.id = r.owner_user_id)`,
}

export function tagLinksSql(ctx: Ctx): string {
  const { tags: table, fk: key } = TABLES[ctx.entity]
  return (
    `from ${table} x join tags t on t.account_id = ${ctx.account} and t.id = x.tag_id ` +
    `where x.account_id = ${ctx.account} and x.${key} = r.service_id`
  )
}

// A record's tags are its links, and their ids are on the record too, in tag_ids (sql/021, kept
// in step by trigger). One tag is found through its links, which hold the record's external id
// (sql/010) and so can drive a page in external-id order. Anything else tests the record's own ids:
// on the links, the planner read every link of the tags before each page's first row. The ids are
// never null and neither is EXISTS, so the negation needs no coalesce (criterionSql).
function tagsSql(c: Criterion, ctx: Ctx): string {
  if (c.op === 'KNOWN') return `${c.negated ? '' : 'not '}r.tag_ids = '{}'`
  const ids = resolvedIds(ctx.lookups.tags, c.operands)
  if (ids.length === 0) return String(c.negated)
  if (c.negated || ids.length > 1) {
    return `${c.negated ? 'not ' : ''}r.tag_ids && ${ctx.bind(`{${ids.join(',')}}`, 'bigint[]')}`
  }
  const links = `${TABLES[ctx.entity].tags} x where x.account_id = ${ctx.account}`
  return `exists (select 1 from ${links} and ${idMatch('x.tag_id', ids, ctx)} and x.external_id = r.external_id)`
}

// EQ/IN on a custom property compare the stored JSON value with the operands as JSON values, which
// is the typed test (the bag holds {codename: value} with value of the property's JSON type; jsonb
// equality compares numbers as numerics and other types as unequal, and parsed dates are canonical
// YYYY-MM-DD strings). One operand is jsonb containment, the same test, which can use the GIN index
// on the bag and its statistics; several are one array of JSON values, whose cost does not grow
// with the list as one containment test per value, ORed, did (docs/benchmarks.md).
function jsonInSql(field: Field, operands: Scalar[], ctx: Ctx): string {
  const bag = field.source === 'attribute' ? 'r.attributes' : 'r.metrics'
  if (operands.length === 1)
    return `${bag} @> ${ctx.bind(JSON.stringify({ [field.name]: operands[0] }), 'jsonb')}`
  const value = `(${bag} -> ${ctx.bind(field.name, 'text')})`
  const values = operands.map((x) => JSON.stringify(x))
  return `${value} = any(${bindList(ctx, values, 'jsonb')})`
}

// The core number fields are integer columns. A numeric operand would cast the column to numeric,
// which no index or column statistics serve; the integer bound with the same meaning for integers
// (>= 2.5 is >= 3, = 2.5 is nothing) compares int4 with int8, which both do. Beyond +-1e18 every
// bound means the same to an int4 column.
function integerBound(x: Scalar, round: 'ceil' | 'floor'): string {
  return BigInt(Math.max(-1e18, Math.min(1e18, Math[round](Number(x))))).toString()
}

// A list is int4 like the column, the values beyond it matching nothing: PostgreSQL hashes a list
// only when both sides hash alike, and compares int4 with an int8 list value by value.
const INT4 = 2 ** 31
const int4 = (x: Scalar) => Number.isInteger(x) && Number(x) >= -INT4 && Number(x) < INT4

const inRange = (name: string) => {
  const [lo, hi] = NUMBER_RANGES.get(name) ?? [-Infinity, Infinity]
  return (x: Scalar) => Number(x) >= lo && Number(x) <= hi
}

const INTEGER_SQL: Partial<Record<PositiveOp, ScalarSql>> = {
  IN: (v, xs, _t, ctx) => {
    const whole = xs.filter(int4)
    if (whole.length === 0) return 'false'
    return whole.length === 1
      ? `${v} = ${ctx.bind(String(whole[0]), 'integer')}`
      : `${v} = any(${bindList(ctx, whole.map(String), 'integer')})`
  },
  LT: (v, [x], _t, ctx) => `${v} < ${ctx.bind(integerBound(x, 'ceil'), 'bigint')}`,
  LTE: (v, [x], _t, ctx) => `${v} <= ${ctx.bind(integerBound(x, 'floor'), 'bigint')}`,
  GT: (v, [x], _t, ctx) => `${v} > ${ctx.bind(integerBound(x, 'floor'), 'bigint')}`,
  GTE: (v, [x], _t, ctx) => `${v} >= ${ctx.bind(integerBound(x, 'ceil'), 'bigint')}`,
}

// A constant list costs the planner an estimate per value, each reading the column's common values
// again, and its estimate sums their shares, a share even for each value no record holds: a
// long name list took longer to plan than to run, and looked broad enough to walk the account
// in external-ID order. So a name list ANDed into the query (`conjunct`) is tested twice: by the
// index, from a scalar subquery that the planner takes for some 10 values and never inlines, and
// by the same constant under coalesce, estimated flat and hashed, which a filter runs first (an
// array from a subquery is searched value by value). Inside an OR the constant stays alone: a
// bitmap scan rechecks the OR's index conditions, the subquery's list among them, on every row
// it reads (docs/benchmarks.md). The external ids are unique, which the planner reads instead of
// their values' statistics.
const HIDDEN_LISTS = new Set(['name'])

function hiddenListSql(v: string, list: string): string {
  return `(coalesce(${v} = any(${list}), false) and ${v} = any((select ${list})::text[]))`
}

function positiveSql(c: Criterion, ctx: Ctx, conjunct: boolean): string {
  if (c.field.type === 'owner')
    return c.op === 'KNOWN' ? OWNER_SQL.KNOWN(ctx) : OWNER_SQL.IN(c.operands, ctx)
  const list = c.op === 'IN' && c.operands.length > 1 && c.field.source === 'core'
  if (list && conjunct && HIDDEN_LISTS.has(c.field.name))
    return hiddenListSql(fieldSql(c.field, ctx), bindList(ctx, c.operands.map(String), 'text'))
  if (c.op === 'IN' && c.field.source !== 'core') return jsonInSql(c.field, c.operands, ctx)
  const integer =
    c.field.source === 'core' && c.field.type === 'number' && !FRACTIONS.has(c.field.name)
      ? INTEGER_SQL[c.op]
      : undefined
  const operands = integer && c.op === 'IN' ? c.operands.filter(inRange(c.field.name)) : c.operands
  return (integer ?? SCALAR_SQL[c.op])(
    fieldSql(c.field, ctx),
    operands,
    valueTypeOf(c.field.type),
    ctx,
  )
}

function criterionSql(c: Criterion, ctx: Ctx, conjunct: boolean): string {
  if (c.field.type === 'tags') return tagsSql(c, ctx)
  const positive = positiveSql(c, ctx, conjunct && !c.negated)
  // SQL null (no value) makes the positive condition unknown; coalesce turns that into a match
  // for the negation, so records without a value satisfy NEQ/NLIKE/NIN/UNKNOWN.
  return c.negated ? `not coalesce(${positive}, false)` : positive
}

// A tree as a condition, with every NOT pushed down to the criteria (De Morgan). A positive
// criterion is SQL null where the record has no value; under AND, OR and WHERE null acts as false
// would, under NOT it would not (NOT null is null). Pushed down, a NOT becomes the criterion's own
// negation, which is never null (criterionSql), so no NOT is left above a criterion. `conjunct`:
// the tree is ANDed into the statement's WHERE, as are the items of its ANDs (once pushed down).
export function treeSql(t: Tree<Criterion>, ctx: Ctx, negate = false, conjunct = true): string {
  if (!isNode(t)) return criterionSql(negate ? { ...t, negated: !t.negated } : t, ctx, conjunct)
  if ('not' in t) return treeSql(t.not, ctx, !negate, conjunct)
  const [items, and] = 'and' in t ? [t.and, !negate] : [t.or, negate]
  // The empty AND holds, the empty OR does not.
  if (items.length === 0) return String(and)
  return `(${items.map((c) => treeSql(c, ctx, negate, conjunct && and)).join(and ? ' and ' : ' or ')})`
}
