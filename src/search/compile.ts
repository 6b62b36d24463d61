// Search compiler: a filter list plus the account's property catalog become one parameterised
// query for postgres.js `sql.unsafe(text, params)`. Every user-supplied string (codenames, values,
// ids) travels as a bound parameter with an explicit cast, so the SQL text is built only from the
// constants in this file.
import { UNSTORABLE } from '../storable.ts'
import { sqlDateOrNull } from '../dates.ts'

export type Entity = 'customer' | 'contact'
export type ValueType = 'string' | 'number' | 'boolean' | 'date'
// owner, tags and customer_external_id hold strings but have their own operator sets and matching.
export type FieldType = ValueType | 'owner' | 'tags' | 'customer_external_id'

export interface PropertyDef {
  codename: string
  kind: 'attribute' | 'metric'
  type: ValueType
}

export interface Filter {
  propertyName: string
  operator: string
  value?: string
  values?: string[]
}

export interface ErrorDetail {
  path: string
  message: string
}

// A class so callers can tell bad input (400) from anything else with `instanceof`.
export class SearchError extends Error {
  readonly errors: ErrorDetail[]
  constructor(errors: ErrorDetail[]) {
    super(errors.map((e) => `${e.path}: ${e.message}`).join('; '))
    this.name = 'SearchError'
    this.errors = errors
  }
}

export const MAX_FILTERS = 10
export const MAX_LIMIT = 1000
// Keeps `today - N` inside Postgres' date range, so a huge N is a 400 instead of a SQL error.
export const MAX_DAYS = 1_000_000

export const OPERATORS = [
  'EQ', 'NEQ', 'LT', 'LTE', 'GT', 'GTE', 'LIKE', 'NLIKE', 'IN', 'NIN', 'GTD', 'LTD', 'KNOWN', 'UNKNOWN',
] as const
export type Operator = (typeof OPERATORS)[number]

const NUMBER_OPERATORS: readonly Operator[] = ['EQ', 'NEQ', 'LT', 'LTE', 'GT', 'GTE', 'IN', 'NIN', 'KNOWN', 'UNKNOWN']
const SET_OPERATORS: readonly Operator[] = ['EQ', 'NEQ', 'IN', 'NIN', 'KNOWN', 'UNKNOWN']

export const ALLOWED_OPERATORS: Record<FieldType, readonly Operator[]> = {
  number: NUMBER_OPERATORS,
  date: [...NUMBER_OPERATORS, 'GTD', 'LTD'],
  string: ['EQ', 'NEQ', 'LIKE', 'NLIKE', 'IN', 'NIN', 'KNOWN', 'UNKNOWN'],
  boolean: ['EQ', 'NEQ', 'KNOWN', 'UNKNOWN'],
  owner: SET_OPERATORS,
  tags: SET_OPERATORS,
  customer_external_id: ['EQ', 'NEQ', 'IN', 'NIN'],
}

// Maps, not object literals: a propertyName like "constructor" must not hit Object.prototype.
export const CORE_FIELDS: Record<Entity, ReadonlyMap<string, FieldType>> = {
  customer: new Map<string, FieldType>([
    ['name', 'string'],
    ['is_churned', 'boolean'],
    ['fitscore', 'number'],
    ['engagementscore', 'number'],
    ['engagementscore_difference', 'number'],
    ['churn_risk', 'number'],
    ['last_seen', 'date'],
    ['owner', 'owner'],
    ['tags', 'tags'],
  ]),
  contact: new Map<string, FieldType>([
    ['name', 'string'],
    ['engagementscore', 'number'],
    ['engagementscore_difference', 'number'],
    ['last_seen', 'date'],
    ['tags', 'tags'],
    ['customer_external_id', 'customer_external_id'],
  ]),
}

export const CUSTOMER_ONLY_FIELDS: ReadonlySet<string> = new Set(['fitscore', 'churn_risk', 'upsell_score', 'is_churned', 'owner'])

// Negative operators are stored as their positive base plus `negated`, so the SQL and the
// in-memory evaluator both derive NEQ/NLIKE/NIN/UNKNOWN as exact complements from one rule.
export type PositiveOp = 'IN' | 'LT' | 'LTE' | 'GT' | 'GTE' | 'LIKE' | 'GTD' | 'LTD' | 'KNOWN'
type Operand = 'one' | 'many' | 'days' | 'none'

const OPERATOR_SHAPES: Record<Operator, { base: PositiveOp; negated: boolean; operand: Operand }> = {
  EQ: { base: 'IN', negated: false, operand: 'one' },
  NEQ: { base: 'IN', negated: true, operand: 'one' },
  IN: { base: 'IN', negated: false, operand: 'many' },
  NIN: { base: 'IN', negated: true, operand: 'many' },
  LT: { base: 'LT', negated: false, operand: 'one' },
  LTE: { base: 'LTE', negated: false, operand: 'one' },
  GT: { base: 'GT', negated: false, operand: 'one' },
  GTE: { base: 'GTE', negated: false, operand: 'one' },
  LIKE: { base: 'LIKE', negated: false, operand: 'one' },
  NLIKE: { base: 'LIKE', negated: true, operand: 'one' },
  GTD: { base: 'GTD', negated: false, operand: 'days' },
  LTD: { base: 'LTD', negated: false, operand: 'days' },
  KNOWN: { base: 'KNOWN', negated: false, operand: 'none' },
  UNKNOWN: { base: 'KNOWN', negated: true, operand: 'none' },
}

export type Scalar = string | number | boolean

export type Field =
  | { source: 'core'; name: string; type: FieldType }
  | { source: 'attribute' | 'metric'; name: string; type: ValueType }

// operands: the parsed values for IN (EQ is IN with one value), one value for LT..LIKE,
// the day count for GTD/LTD, none for KNOWN.
export interface Criterion {
  field: Field
  op: PositiveOp
  negated: boolean
  operands: Scalar[]
}

export function valueTypeOf(type: FieldType): ValueType {
  return type === 'owner' || type === 'tags' || type === 'customer_external_id' ? 'string' : type
}

const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/

function utcDate(s: string): Date | undefined {
  const m = DATE_PATTERN.exec(s)
  if (!m) return undefined
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])]
  // setUTCFullYear, unlike Date.UTC, does not map years 0..99 to 1900..1999.
  const d = new Date(0)
  d.setUTCFullYear(year, month - 1, day)
  // Postgres has no year 0, and a rolled-over day (02-30) is not a date.
  const same = d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day
  return year >= 1 && same ? d : undefined
}

export function isIsoDate(s: string): boolean {
  return utcDate(s) !== undefined
}

// Days since 1970-01-01 of a valid YYYY-MM-DD string.
export function dayNumber(s: string): number {
  const d = utcDate(s)
  if (!d) throw new Error(`not a YYYY-MM-DD date: ${s}`)
  return Math.round(d.getTime() / 86_400_000)
}

// Plain decimal notation only: Number() alone would also accept '', ' 1', '0x10' and 'Infinity'.
const NUMBER_PATTERN = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/

type Parsed = { value: Scalar } | { error: string }

const VALUE_PARSERS: Record<ValueType, (raw: string) => Parsed> = {
  number: (raw) =>
    NUMBER_PATTERN.test(raw) && Number.isFinite(Number(raw)) ? { value: Number(raw) } : { error: 'must be a finite number' },
  date: (raw) => (isIsoDate(raw) ? { value: raw } : { error: 'must be a valid date YYYY-MM-DD' }),
  boolean: (raw) =>
    raw === 'true' ? { value: true } : raw === 'false' ? { value: false } : { error: "must be 'true' or 'false'" },
  // Rejecting what Postgres cannot hold here keeps such a value from becoming a 500.
  string: (raw) => (UNSTORABLE.test(raw) ? { error: 'must not contain NUL characters or unpaired surrogates' } : { value: raw }),
}

function parseValue(raw: unknown, type: ValueType): Parsed {
  return typeof raw === 'string' ? VALUE_PARSERS[type](raw) : { error: 'must be a string' }
}

function parseDays(raw: unknown): Parsed {
  const ok = typeof raw === 'string' && /^\d+$/.test(raw) && Number(raw) <= MAX_DAYS
  return ok ? { value: Number(raw) } : { error: `must be a whole number of days from 0 to ${MAX_DAYS}` }
}

function lookupField(entity: Entity, name: string, catalog: ReadonlyMap<string, PropertyDef>): Field | string {
  if (entity === 'contact' && CUSTOMER_ONLY_FIELDS.has(name)) return `${name} is a customer-only field`
  // Core fields win over custom codenames of the same name.
  const core = CORE_FIELDS[entity].get(name)
  if (core) return { source: 'core', name, type: core }
  const def = catalog.get(name)
  if (def) return { source: def.kind, name, type: def.type }
  return `unknown property ${JSON.stringify(name)}`
}

// The raw strings an operator takes, each with its error path. IN/NIN take `values`, or a single
// `value` when `values` is absent.
function rawOperands(filter: Filter, operand: Operand, at: string): { raw: unknown; path: string }[] | ErrorDetail {
  if (operand === 'none') return []
  if (operand === 'many' && filter.values !== undefined) {
    const values: unknown = filter.values
    if (!Array.isArray(values) || values.length === 0) return { path: `${at}/values`, message: 'must be a non-empty array' }
    return values.map((raw, i) => ({ raw, path: `${at}/values/${i}` }))
  }
  if (filter.value === undefined) {
    return { path: operand === 'many' ? `${at}/values` : `${at}/value`, message: `is required for ${filter.operator}` }
  }
  return [{ raw: filter.value, path: `${at}/value` }]
}

function operandValues(filter: Filter, operand: Operand, type: ValueType, at: string, errors: ErrorDetail[]): Scalar[] {
  const raws = rawOperands(filter, operand, at)
  if (!Array.isArray(raws)) {
    errors.push(raws)
    return []
  }
  return raws.flatMap(({ raw, path }) => {
    const parsed = operand === 'days' ? parseDays(raw) : parseValue(raw, type)
    if ('value' in parsed) return [parsed.value]
    errors.push({ path, message: parsed.error })
    return []
  })
}

function resolveFilter(
  entity: Entity,
  filter: Filter,
  at: string,
  catalog: ReadonlyMap<string, PropertyDef>,
  errors: ErrorDetail[],
): Criterion | undefined {
  const field = lookupField(entity, filter.propertyName, catalog)
  if (typeof field === 'string') {
    errors.push({ path: `${at}/propertyName`, message: field })
    return undefined
  }
  const allowed = ALLOWED_OPERATORS[field.type]
  const operator = filter.operator as Operator
  if (!allowed.includes(operator)) {
    const known = (OPERATORS as readonly string[]).includes(filter.operator)
    const what = known ? `operator ${filter.operator} is not allowed` : `unknown operator ${JSON.stringify(filter.operator)}`
    errors.push({ path: `${at}/operator`, message: `${what} for ${field.name} (${field.type}); allowed: ${allowed.join(', ')}` })
    return undefined
  }
  const shape = OPERATOR_SHAPES[operator]
  const before = errors.length
  const operands = operandValues(filter, shape.operand, valueTypeOf(field.type), at, errors)
  if (errors.length > before) return undefined
  return { field, op: shape.base, negated: shape.negated, operands }
}

// Active customers only, unless the request filters on is_churned itself.
const ACTIVE_ONLY: Criterion = {
  field: { source: 'core', name: 'is_churned', type: 'boolean' },
  op: 'IN',
  negated: false,
  operands: [false],
}

function collectCriteria(
  entity: Entity,
  filters: readonly Filter[],
  catalog: readonly PropertyDef[],
  errors: ErrorDetail[],
): Criterion[] {
  if (filters.length > MAX_FILTERS) errors.push({ path: '/filters', message: `at most ${MAX_FILTERS} filters are allowed` })
  const defs = new Map(catalog.map((d) => [d.codename, d]))
  const criteria = filters.flatMap((f, i) => resolveFilter(entity, f, `/filters/${i}`, defs, errors) ?? [])
  const churnFiltered = filters.some((f) => f.propertyName === 'is_churned')
  return entity === 'customer' && !churnFiltered ? [...criteria, ACTIVE_ONLY] : criteria
}

// The validated filters plus the default conditions, shared by the SQL compiler and the
// in-memory evaluator so both apply identical rules. Throws SearchError on invalid filters.
export function searchCriteria(entity: Entity, filters: readonly Filter[], catalog: readonly PropertyDef[]): Criterion[] {
  const errors: ErrorDetail[] = []
  const criteria = collectCriteria(entity, filters, catalog, errors)
  if (errors.length > 0) throw new SearchError(errors)
  return criteria
}

// ---------------------------------------------------------------------------------------------
// SQL

type SqlType = 'text' | 'numeric' | 'boolean' | 'date' | 'integer' | 'bigint' | 'bigint[]' | 'jsonb'

interface Ctx {
  // Appends a parameter and returns its typed placeholder, e.g. `$3::text::numeric`.
  bind: (value: string, type: SqlType) => string
  account: string
  today: () => string
  entity: Entity
  lookups: Partial<Lookups>
}

const SQL_TYPES: Record<ValueType, SqlType> = { string: 'text', number: 'numeric', boolean: 'boolean', date: 'date' }

// Canonical text of a parsed operand; numbers go through String() so Postgres compares the same
// double the in-memory evaluator sees.
function bindScalar(ctx: Ctx, value: Scalar, type: ValueType): string {
  return ctx.bind(String(value), SQL_TYPES[type])
}

// A custom property's value in a jsonb bag, typed, or null when absent or of another JSON type.
const JSON_VALUE_SQL: Record<ValueType, (bag: string, key: string) => string> = {
  string: (bag, key) => `case when jsonb_typeof(${bag} -> ${key}) = 'string' then ${bag} ->> ${key} end`,
  number: (bag, key) => `case when jsonb_typeof(${bag} -> ${key}) = 'number' then (${bag} ->> ${key})::numeric end`,
  boolean: (bag, key) => `case when jsonb_typeof(${bag} -> ${key}) = 'boolean' then (${bag} ->> ${key})::boolean end`,
  date: (bag, key) => `case when jsonb_typeof(${bag} -> ${key}) = 'string' then ${sqlDateOrNull(`(${bag} ->> ${key})`)} end`,
}

// Core scalar fields; `r` is the searched record, `h` its scores, `oc` a contact's owning customer.
const CORE_SQL: ReadonlyMap<string, string> = new Map([
  ['name', 'r.name'],
  ['is_churned', 'r.is_churned'],
  ['fitscore', 'h.fitscore'],
  ['engagementscore', 'h.engagementscore'],
  ['engagementscore_difference', 'h.engagementscore_difference'],
  ['churn_risk', 'h.churn_risk'],
  ['last_seen', 'h.last_seen'],
  ['customer_external_id', 'oc.external_id'],
])

function fieldSql(field: Field, ctx: Ctx): string {
  if (field.source === 'core') return CORE_SQL.get(field.name)!
  const bag = field.source === 'attribute' ? 'r.attributes' : 'r.metrics'
  return `(${JSON_VALUE_SQL[field.type](bag, ctx.bind(field.name, 'text'))})`
}

type ScalarSql = (v: string, operands: Scalar[], type: ValueType, ctx: Ctx) => string

const SCALAR_SQL: Record<PositiveOp, ScalarSql> = {
  IN: (v, xs, t, ctx) => `${v} in (${xs.map((x) => bindScalar(ctx, x, t)).join(', ')})`,
  LT: (v, [x], t, ctx) => `${v} < ${bindScalar(ctx, x, t)}`,
  LTE: (v, [x], t, ctx) => `${v} <= ${bindScalar(ctx, x, t)}`,
  GT: (v, [x], t, ctx) => `${v} > ${bindScalar(ctx, x, t)}`,
  GTE: (v, [x], t, ctx) => `${v} >= ${bindScalar(ctx, x, t)}`,
  // LIKE rather than strpos so that a trigram index on lower(name) can serve it; the value's
  // \, % and _ are escaped in SQL (folded to a constant at planning) so they stay literal.
  LIKE: (v, [x], _t, ctx) => {
    const escaped = `replace(replace(replace(lower(${ctx.bind(String(x), 'text')}), '\\', '\\\\'), '%', '\\%'), '_', '\\_')`
    return `lower(${v}) like ('%' || ${escaped} || '%')`
  },
  GTD: (v, [n], _t, ctx) => `${v} < ${ctx.today()} - ${ctx.bind(String(n), 'integer')}`,
  LTD: (v, [n], _t, ctx) => `(${v} > ${ctx.today()} - ${ctx.bind(String(n), 'integer')} and ${v} <= ${ctx.today()})`,
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

// owner and tags allow only IN (EQ) and KNOWN as positive operators.
type SetSql = { IN: (xs: Scalar[], ctx: Ctx) => string; KNOWN: (ctx: Ctx) => string }

const OWNER_SQL: SetSql = {
  IN: (xs, ctx) => idMatch('r.owner_user_id', resolvedIds(ctx.lookups.users, xs), ctx),
  // owner_user_id has no foreign key: an owner is known when the user row exists.
  KNOWN: (ctx) => `exists (select 1 from users u where u.account_id = ${ctx.account} and u.id = r.owner_user_id)`,
}

const TAG_LINKS: Record<Entity, { table: string; key: string }> = {
  customer: { table: 'customer_tags', key: 'customer_id' },
  contact: { table: 'contact_tags', key: 'contact_id' },
}

function tagLinksSql(ctx: Ctx): string {
  const { table, key } = TAG_LINKS[ctx.entity]
  return `from ${table} x join tags t on t.account_id = ${ctx.account} and t.id = x.tag_id where x.account_id = ${ctx.account} and x.${key} = r.service_id`
}

// The link tables reference tags by foreign key, so a link is a tag. A link holds its record's
// external id too (sql/010): matched on it, the links of one tag, in external-id order, can drive a
// page instead of a probe of every record walked.
const TAGS_SQL: SetSql = {
  IN: (xs, ctx) => {
    const ids = resolvedIds(ctx.lookups.tags, xs)
    const { table } = TAG_LINKS[ctx.entity]
    return ids.length === 0
      ? 'false'
      : `exists (select 1 from ${table} x where x.account_id = ${ctx.account} and ${idMatch('x.tag_id', ids, ctx)} and x.external_id = r.external_id)`
  },
  KNOWN: (ctx) => {
    const { table, key } = TAG_LINKS[ctx.entity]
    return `exists (select 1 from ${table} x where x.account_id = ${ctx.account} and x.${key} = r.service_id)`
  },
}

// EQ/IN on a custom property as jsonb containment, which is the same test (the bag holds
// {codename: value} with value of the property's JSON type; numbers compare as numerics, and
// parsed dates are canonical YYYY-MM-DD strings) but can use the GIN index on the bag and its
// statistics. Each operand is bound as a whole JSON document, built here from parsed values.
function containmentSql(field: Field, operands: Scalar[], ctx: Ctx): string {
  const bag = field.source === 'attribute' ? 'r.attributes' : 'r.metrics'
  const tests = operands.map((x) => `${bag} @> ${ctx.bind(JSON.stringify({ [field.name]: x }), 'jsonb')}`)
  return tests.length === 1 ? tests[0] : `(${tests.join(' or ')})`
}

// The core number fields are integer columns. A numeric operand would cast the column to numeric,
// which no index or column statistics serve; the integer bound with the same meaning for integers
// (>= 2.5 is >= 3, = 2.5 is nothing) compares int4 with int8, which both do. Beyond +-1e18 every
// bound means the same to an int4 column.
function integerBound(x: Scalar, round: 'ceil' | 'floor'): string {
  return BigInt(Math.max(-1e18, Math.min(1e18, Math[round](Number(x))))).toString()
}

const INTEGER_SQL: Partial<Record<PositiveOp, ScalarSql>> = {
  IN: (v, xs, _t, ctx) => {
    const whole = xs.filter((x) => Number.isInteger(x) && Math.abs(Number(x)) <= 1e18)
    return whole.length === 0 ? 'false' : `${v} in (${whole.map((x) => ctx.bind(String(x), 'bigint')).join(', ')})`
  },
  LT: (v, [x], _t, ctx) => `${v} < ${ctx.bind(integerBound(x, 'ceil'), 'bigint')}`,
  LTE: (v, [x], _t, ctx) => `${v} <= ${ctx.bind(integerBound(x, 'floor'), 'bigint')}`,
  GT: (v, [x], _t, ctx) => `${v} > ${ctx.bind(integerBound(x, 'floor'), 'bigint')}`,
  GTE: (v, [x], _t, ctx) => `${v} >= ${ctx.bind(integerBound(x, 'ceil'), 'bigint')}`,
}

function positiveSql(c: Criterion, ctx: Ctx): string {
  const set = c.field.type === 'owner' ? OWNER_SQL : c.field.type === 'tags' ? TAGS_SQL : undefined
  if (set) return c.op === 'KNOWN' ? set.KNOWN(ctx) : set.IN(c.operands, ctx)
  if (c.op === 'IN' && c.field.source !== 'core') return containmentSql(c.field, c.operands, ctx)
  const integer = c.field.source === 'core' && c.field.type === 'number' ? INTEGER_SQL[c.op] : undefined
  return (integer ?? SCALAR_SQL[c.op])(fieldSql(c.field, ctx), c.operands, valueTypeOf(c.field.type), ctx)
}

function criterionSql(c: Criterion, ctx: Ctx): string {
  const positive = positiveSql(c, ctx)
  // SQL null (no value) makes the positive condition unknown; coalesce turns that into a match
  // for the negation, so records without a value satisfy NEQ/NLIKE/NIN/UNKNOWN.
  return c.negated ? `not coalesce(${positive}, false)` : positive
}

function isoTimestamp(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

function propertiesSql(selected: readonly string[] | undefined, ctx: Ctx): string {
  if (!selected) return 'r.attributes || r.metrics'
  if (selected.length === 0) return `'{}'::jsonb`
  const keys = [...new Set(selected)].map((k) => ctx.bind(k, 'text')).join(', ')
  return `(select coalesce(jsonb_object_agg(p.key, p.value), '{}'::jsonb) from jsonb_each(r.attributes || r.metrics) p where p.key in (${keys}))`
}

function columnsSql(ctx: Ctx, properties: string): string[] {
  const tags = `array(select t.title ${tagLinksSql(ctx)} order by t.title collate "C") as tags`
  const common = {
    // bigint columns: the connection parses them to JSON numbers (ids stay below 2^53).
    head: ['r.external_id as id', 'r.service_id', 'r.name'],
    tail: [
      `${properties} as properties`,
      `${isoTimestamp('r.created_at')} as "createdAt"`,
      `${isoTimestamp('r.updated_at')} as "updatedAt"`,
    ],
  }
  const lastSeen = `to_char(h.last_seen, 'YYYY-MM-DD') as last_seen`
  if (ctx.entity === 'customer') {
    return [
      ...common.head,
      'h.fitscore',
      'h.engagementscore',
      'h.churn_risk',
      'r.is_churned',
      lastSeen,
      'h.engagementscore_difference',
      'h.engagementscore_trend',
      `(select u.email from users u where u.account_id = ${ctx.account} and u.id = r.owner_user_id) as owner`,
      tags,
      ...common.tail,
    ]
  }
  return [
    ...common.head,
    'h.engagementscore',
    'h.engagementscore_difference',
    'h.engagementscore_trend',
    lastSeen,
    tags,
    'oc.external_id as customer_external_id',
    'oc.service_id as customer_service_id',
    ...common.tail,
  ]
}

function afterSql(ctx: Ctx, serviceId: string): string {
  const table = ctx.entity === 'customer' ? 'customers' : 'contacts'
  return `select a.external_id from ${table} a where a.account_id = ${ctx.account} and a.service_id = ${serviceId}`
}

// A record's scores (`h`, sql/009_scores.sql; a record not yet scored has none) and a contact's
// customer (`oc`), each joined to the page's records `r`.
function joinsSql(ctx: Ctx): { scores: string; customer: string } {
  return {
    scores: ctx.entity === 'customer'
      ? `left join customer_scores h on h.account_id = ${ctx.account} and h.customer_id = r.service_id`
      : `left join contact_scores h on h.account_id = ${ctx.account} and h.contact_id = r.service_id`,
    customer: ctx.entity === 'customer' ? '' : `left join customers oc on oc.account_id = ${ctx.account} and oc.service_id = r.customer_id`,
  }
}

function checkProperties(properties: readonly string[], catalog: readonly PropertyDef[], errors: ErrorDetail[]): void {
  const known = new Set(catalog.map((d) => d.codename))
  properties.forEach((p, i) => {
    if (!known.has(p)) errors.push({ path: `/properties/${i}`, message: `unknown property ${JSON.stringify(p)}` })
  })
}

// The account's user and tag ids named by owner and tags operands, keyed by the operand exactly as
// sent; the caller resolves them (emails and titles match case-insensitively) before compiling.
// An operand missing from its map names nothing.
export interface Lookups {
  users: ReadonlyMap<string, number>
  tags: ReadonlyMap<string, number>
}

export interface ContextNeeds {
  // The request names a custom property (a filter on anything but a core field, or `properties`).
  catalog: boolean
  // The owner and tags operands to look up.
  emails: string[]
  titles: string[]
}

// What a request needs from the database before it can be compiled, read from the raw request
// (before validation: what a filter that turns out invalid needs is merely unused). A request
// needing nothing compiles with an empty catalog and no lookups.
export function contextNeeds(entity: Entity, filters: readonly Filter[], properties?: readonly string[]): ContextNeeds {
  // A string Postgres cannot hold is not sent to it; the compiler rejects it as a value anyway.
  const operands = (name: string) => [...new Set(filters.filter((f) => f.propertyName === name).flatMap((f) =>
    [f.value, ...(Array.isArray(f.values) ? f.values : [])].filter((x): x is string => typeof x === 'string' && !UNSTORABLE.test(x))))]
  return {
    catalog: properties !== undefined || filters.some((f) => !CORE_FIELDS[entity].has(f.propertyName)),
    emails: entity === 'customer' ? operands('owner') : [],
    titles: operands('tags'),
  }
}

export interface SearchInput {
  entity: Entity
  accountId: number | string
  filters: readonly Filter[]
  properties?: readonly string[]
  limit: number
  // The page starts after this record (of the searched entity, in the account); when there is no
  // such record the page is empty, and the caller tells why.
  afterServiceId?: number
  // One record by external ID (the single-record read endpoints).
  externalId?: string
  catalog: readonly PropertyDef[]
  today: string
  // Required when the filters use owner or tags.
  lookups?: Lookups
  // Each record as one JSON text rendered by Postgres (column `json`, beside `service_id`), so that
  // a page goes out without being parsed and serialized again.
  json?: boolean
}

export interface CompiledSearch {
  text: string
  params: unknown[]
}

// One page of records ordered by external ID; it asks for limit + 1 rows so the caller can tell
// whether a next page exists.
export function compileSearch(input: SearchInput): CompiledSearch {
  const errors: ErrorDetail[] = []
  if (!Number.isInteger(input.limit) || input.limit < 1 || input.limit > MAX_LIMIT) {
    errors.push({ path: '/limit', message: `must be an integer from 1 to ${MAX_LIMIT}` })
  }
  const criteria = collectCriteria(input.entity, input.filters, input.catalog, errors)
  if (input.properties) checkProperties(input.properties, input.catalog, errors)
  if (errors.length > 0) throw new SearchError(errors)

  const params: string[] = []
  // Every parameter is declared text and cast in SQL: postgres.js serializes a parameter by the
  // type the server reports for it, and its boolean and date serializers mangle strings
  // ('true' becomes 'f').
  const bind = (value: string, type: SqlType): string => {
    params.push(value)
    return type === 'text' ? `$${params.length}::text` : `$${params.length}::text::${type}`
  }
  let today: string | undefined
  const ctx: Ctx = {
    bind,
    account: bind(String(input.accountId), 'bigint'),
    // Bound on first use: an unused parameter would leave Postgres unable to infer its type.
    today: () => (today ??= bind(input.today, 'date')),
    entity: input.entity,
    lookups: input.lookups ?? {},
  }

  const columns = columnsSql(ctx, propertiesSql(input.properties, ctx))
  const where = [
    `r.account_id = ${ctx.account}`,
    ...criteria.map((c) => criterionSql(c, ctx)),
    ...(input.afterServiceId === undefined ? [] : [`r.external_id > (${afterSql(ctx, bind(String(input.afterServiceId), 'bigint'))})`]),
    ...(input.externalId === undefined ? [] : [`r.external_id = ${bind(input.externalId, 'text')}`]),
  ]
  // The page is cut first, joining only what its filters read; the columns' joins come after, so
  // that the matches of a broad filter are not all joined before the sort and the limit.
  const joins = joinsSql(ctx)
  const conditions = where.join('\n  and ')
  const reads = (alias: string) => criteria.some((c) => c.field.source === 'core' && CORE_SQL.get(c.field.name)?.startsWith(`${alias}.`))
  const filterJoins = [reads('h') ? joins.scores : '', reads('oc') ? joins.customer : '']
  const page = [
    `select ${columns.join(',\n  ')}`,
    `from (select r.* from ${[ctx.entity === 'customer' ? 'customers r' : 'contacts r', ...filterJoins.filter(Boolean)].join(' ')}`,
    `where ${conditions}`,
    'order by r.external_id',
    `limit ${bind(String(input.limit + 1), 'integer')}`,
    `) r ${[joins.scores, joins.customer].filter(Boolean).join(' ')}`,
    'order by r.external_id',
  ].join('\n')
  const text = input.json ? `select row_to_json(p)::text as json, p.service_id from (\n${page}\n) p order by p.id` : page
  return { text, params }
}
