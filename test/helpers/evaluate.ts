// In-memory evaluation of search filters and trees over plain records: the reference the SQL
// compiler (src/search/) is checked against. It shares only validation and value parsing with the
// compiler (criteria.ts), never its SQL, so a mistake in one shows up as a disagreement
// with the other.

import { dayNumber, isDate } from '../../src/dates.ts'
import { type FieldError, refuse } from '../../src/errors.ts'
import { collectTree } from '../../src/search/criteria.ts'
import { resolveSort, type SortKey } from '../../src/search/sort.ts'
import {
  type Conditions,
  type Criterion,
  type Entity,
  type Field,
  isNode,
  type PositiveOp,
  type PropertyDef,
  type Scalar,
  type SortSpec,
  type Tree,
  type ValueType,
  valueTypeOf,
} from '../../src/search/fields.ts'

export interface SearchRecord {
  external_id: string
  name?: string | null
  is_churned?: boolean | null
  fitscore?: number | null
  engagementscore?: number | null
  engagementscore_difference?: number | null
  churn_risk?: number | null
  upsell_score?: number | null
  last_seen?: string | null
  // null when the customer has no owner or the owner's user row does not exist.
  owner_email?: string | null
  tags?: readonly string[]
  customer_external_id?: string | null
  attributes?: Readonly<Record<string, unknown>>
  metrics?: Readonly<Record<string, unknown>>
  // ISO 8601 in UTC with microseconds, so that text order is time order.
  created_at?: string
  updated_at?: string
}

type Value = Scalar | null

const CORE_VALUES: ReadonlyMap<string, (r: SearchRecord) => unknown> = new Map<
  string,
  (r: SearchRecord) => unknown
>([
  ['name', (r) => r.name],
  ['is_churned', (r) => r.is_churned],
  ['fitscore', (r) => r.fitscore],
  ['engagementscore', (r) => r.engagementscore],
  ['engagementscore_difference', (r) => r.engagementscore_difference],
  ['churn_risk', (r) => r.churn_risk],
  ['upsell_score', (r) => r.upsell_score],
  ['last_seen', (r) => r.last_seen],
  ['customer_external_id', (r) => r.customer_external_id],
])

// A stored value of another JSON type than the property's counts as no value, as in the SQL.
const TYPED: Record<ValueType, (raw: unknown) => Value> = {
  string: (raw) => (typeof raw === 'string' ? raw : null),
  number: (raw) => (typeof raw === 'number' && Number.isFinite(raw) ? raw : null),
  boolean: (raw) => (typeof raw === 'boolean' ? raw : null),
  date: (raw) => (typeof raw === 'string' && isDate(raw) ? raw : null),
}

// Own keys only: a codename like "constructor" must not read Object.prototype.
function ownValue(bag: Readonly<Record<string, unknown>> | undefined, key: string): unknown {
  return bag !== undefined && Object.hasOwn(bag, key) ? bag[key] : undefined
}

function fieldValue(record: SearchRecord, field: Field): Value {
  const raw =
    field.source === 'core'
      ? CORE_VALUES.get(field.name)!(record)
      : ownValue(field.source === 'attribute' ? record.attributes : record.metrics, field.name)
  return TYPED[valueTypeOf(field.type)](raw)
}

// Only number and date fields are ordered; dates compare as day numbers.
function ordinal(x: Scalar): number {
  return typeof x === 'string' ? dayNumber(x) : Number(x)
}

type ScalarTest = (v: Value, operands: Scalar[], today: string) => boolean

const SCALAR_TESTS: Record<PositiveOp, ScalarTest> = {
  IN: (v, xs) => v !== null && xs.includes(v),
  LT: (v, [x]) => v !== null && ordinal(v) < ordinal(x),
  LTE: (v, [x]) => v !== null && ordinal(v) <= ordinal(x),
  GT: (v, [x]) => v !== null && ordinal(v) > ordinal(x),
  GTE: (v, [x]) => v !== null && ordinal(v) >= ordinal(x),
  LIKE: (v, [x]) => typeof v === 'string' && v.toLowerCase().includes(String(x).toLowerCase()),
  GTD: (v, [n], today) => typeof v === 'string' && dayNumber(v) < dayNumber(today) - Number(n),
  LTD: (v, [n], today) =>
    typeof v === 'string' &&
    dayNumber(today) - Number(n) < dayNumber(v) &&
    dayNumber(v) <= dayNumber(today),
  KNOWN: (v) => v !== null && v !== '',
}

function anyCaseInsensitive(candidates: readonly string[], operands: Scalar[]): boolean {
  const wanted = new Set(operands.map((x) => String(x).toLowerCase()))
  return candidates.some((c) => wanted.has(c.toLowerCase()))
}

function positive(record: SearchRecord, c: Criterion, today: string): boolean {
  if (c.field.type === 'owner') {
    const email = record.owner_email ?? null
    return c.op === 'KNOWN'
      ? email !== null
      : email !== null && anyCaseInsensitive([email], c.operands)
  }
  if (c.field.type === 'tags') {
    const tags = record.tags ?? []
    return c.op === 'KNOWN' ? tags.length > 0 : anyCaseInsensitive(tags, c.operands)
  }
  return SCALAR_TESTS[c.op](fieldValue(record, c.field), c.operands, today)
}

// NOT is evaluated as it reads, where the compiler pushes it down to the criteria.
function holds(record: SearchRecord, t: Tree<Criterion>, today: string): boolean {
  if (!isNode(t)) return positive(record, t, today) !== t.negated
  if ('not' in t) return !holds(record, t.not, today)
  return 'and' in t
    ? t.and.every((c) => holds(record, c, today))
    : t.or.some((c) => holds(record, c, today))
}

// Same rules as compileSearch's WHERE clause (default active-only included); refuses (400) the
// conditions the compiler would refuse.
export function matches(
  record: SearchRecord,
  conditions: Conditions,
  catalog: readonly PropertyDef[],
  today: string,
  entity: Entity,
): boolean {
  const errors: FieldError[] = []
  const tree = collectTree(entity, conditions, catalog, errors)
  if (errors.length > 0) refuse(400, 'The search request is invalid.', errors)
  return holds(record, tree, today)
}

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))

function keyValue(record: SearchRecord, key: SortKey): Value {
  if (key.type === 'timestamp')
    return (key.name === 'createdAt' ? record.created_at : record.updated_at) ?? null
  return fieldValue(record, { source: key.source, name: key.name, type: key.type } as Field)
}

// Values of one key, never null: strings by their bytes, dates as their text, false before true.
function compareValues(a: Scalar, b: Scalar): number {
  if (typeof a === 'string') return byteOrder(a, String(b))
  return Number(a) - Number(b)
}

// Same order as compileSearch's under `sort`: key by key, records without a value last in either
// direction, then the external ID. Refuses (400) the keys the compiler would refuse.
export function sortRecords(
  records: readonly SearchRecord[],
  sort: readonly SortSpec[],
  catalog: readonly PropertyDef[],
  entity: Entity,
): SearchRecord[] {
  const errors: FieldError[] = []
  const keys = resolveSort(entity, sort, new Map(catalog.map((d) => [d.codename, d])), errors)
  if (errors.length > 0) refuse(400, 'The search request is invalid.', errors)
  const compare = (a: SearchRecord, b: SearchRecord) => {
    for (const key of keys) {
      const [x, y] = [keyValue(a, key), keyValue(b, key)]
      if (x === null || y === null) {
        if (x !== y) return x === null ? 1 : -1
        continue
      }
      const order = compareValues(x, y) * (key.descending ? -1 : 1)
      if (order !== 0) return order
    }
    return byteOrder(a.external_id, b.external_id)
  }
  return [...records].sort(compare)
}
