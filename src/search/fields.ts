// The search fields and operators: which core fields each entity has, their types, which
// operators each type allows, and the shape of a validated criterion. A pure table, read by the
// criteria parser and the SQL compiler.
import type { Entity, PropertyDef, PropertyType } from '../property.ts'

export type { Entity, PropertyDef }
export type ValueType = PropertyType
// owner, tags and the external ids hold strings but have their own operator sets and matching.
export type FieldType = ValueType | 'owner' | 'tags' | 'external_id'

// A type rather than an interface, so that a saved search is a JSON value to postgres.js.
export type Filter = {
  propertyName: string
  operator: string
  value?: string
  values?: string[]
}

export const DIRECTIONS = ['asc', 'desc'] as const

export interface SortSpec {
  propertyName: string
  direction?: (typeof DIRECTIONS)[number]
}

// Sortable, not filterable: the record's own timestamps, by the names they have in its JSON.
export const TIMESTAMP_FIELDS: ReadonlyMap<string, string> = new Map([
  ['createdAt', 'created_at'],
  ['updatedAt', 'updated_at'],
])

// A boolean tree whose leaves are filters (as sent) or criteria (validated). A node is an object
// with a single key that names it.
export type Node<Leaf> =
  | { and: readonly Tree<Leaf>[] }
  | { or: readonly Tree<Leaf>[] }
  | { not: Tree<Leaf> }
export type Tree<Leaf> = Leaf | Node<Leaf>
export type Condition = Tree<Filter>

export const NODE_KEYS = ['and', 'or', 'not'] as const

// Leaves never carry a node key: filters are strict objects, criteria have their own fields.
export function isNode<Leaf>(t: Tree<Leaf>): t is Node<Leaf> {
  return typeof t === 'object' && t !== null && NODE_KEYS.some((k) => Object.hasOwn(t, k))
}

function childrenOf<Leaf>(node: Node<Leaf>): readonly Tree<Leaf>[] {
  return 'not' in node ? [node.not] : 'and' in node ? node.and : node.or
}

export function leavesOf<Leaf>(t: Tree<Leaf>): Leaf[] {
  return isNode(t) ? childrenOf(t).flatMap(leavesOf) : [t]
}

// What a request searches by: the interface's filters (ANDed), or a `where` tree instead.
export type Conditions =
  | { filters?: readonly Filter[]; where?: undefined }
  | { where: Condition; filters?: undefined }

// Keeps `today - N` inside Postgres' date range, so a huge N is a 400 instead of a SQL error.
export const MAX_DAYS = 1_000_000

export const OPERATORS = [
  'EQ',
  'NEQ',
  'LT',
  'LTE',
  'GT',
  'GTE',
  'LIKE',
  'NLIKE',
  'IN',
  'NIN',
  'GTD',
  'LTD',
  'KNOWN',
  'UNKNOWN',
] as const
export type Operator = (typeof OPERATORS)[number]

const NUMBER_OPERATORS: readonly Operator[] = [
  'EQ',
  'NEQ',
  'LT',
  'LTE',
  'GT',
  'GTE',
  'IN',
  'NIN',
  'KNOWN',
  'UNKNOWN',
]
const SET_OPERATORS: readonly Operator[] = ['EQ', 'NEQ', 'IN', 'NIN', 'KNOWN', 'UNKNOWN']

export const ALLOWED_OPERATORS: Record<FieldType, readonly Operator[]> = {
  number: NUMBER_OPERATORS,
  date: [...NUMBER_OPERATORS, 'GTD', 'LTD'],
  string: ['EQ', 'NEQ', 'LIKE', 'NLIKE', 'IN', 'NIN', 'KNOWN', 'UNKNOWN'],
  boolean: ['EQ', 'NEQ', 'KNOWN', 'UNKNOWN'],
  owner: SET_OPERATORS,
  tags: SET_OPERATORS,
  external_id: ['EQ', 'NEQ', 'IN', 'NIN'],
}

// The days back a customer's past engagement is a search field for (engagementscore_7d_ago and its
// change since, ...): the periods of the "This week" report (insights/week.ts), whose movements are
// searches of them. `properties` may name them too, to answer them beside the custom values.
export const PAST_DAYS = [7, 30] as const
export const PAST_FIELDS = PAST_DAYS.flatMap((n) => [
  `engagementscore_${n}d_ago`,
  `engagementscore_change_${n}d`,
])
// The range each core number field's value is computed in (docs/scoring.md: rule scores and their
// weighted means -100..100, churn risk and upsell 0..100, a difference of two scores -200..200).
// An IN operand outside it matches nothing; left out of the list, it no longer counts in the
// planner's estimate, which takes each listed value for a share of the account.
const SCORE = [-100, 100] as const
const CHANGE = [-200, 200] as const
export const NUMBER_RANGES: ReadonlyMap<string, readonly [number, number]> = new Map([
  ['fitscore', SCORE],
  ['engagementscore', SCORE],
  ['engagementscore_difference', CHANGE],
  ['churn_risk', [0, 100] as const],
  ['upsell_score', [0, 100] as const],
  ['churn_probability', [0, 1] as const],
  ...PAST_DAYS.flatMap((n): [string, readonly [number, number]][] => [
    [`engagementscore_${n}d_ago`, SCORE],
    [`engagementscore_change_${n}d`, CHANGE],
  ]),
])
// The core number fields that are not integers (the learned churn probability, 0..1): compared and
// paged as doubles, where the integer scores are compared as integers.
export const FRACTIONS: ReadonlySet<string> = new Set(['churn_probability'])
// When a customer churned, and when it was last reactivated: the report's churned and reactivated.
const CHURN_FIELDS = ['churned_date', 'reactivated_date']

// Maps, not object literals: a propertyName like "constructor" must not hit Object.prototype.
export const CORE_FIELDS: Record<Entity, ReadonlyMap<string, FieldType>> = {
  customer: new Map<string, FieldType>([
    ['name', 'string'],
    ['is_churned', 'boolean'],
    ['fitscore', 'number'],
    ['engagementscore', 'number'],
    ['engagementscore_difference', 'number'],
    ['churn_risk', 'number'],
    ['upsell_score', 'number'],
    ['churn_probability', 'number'],
    ['last_seen', 'date'],
    ...PAST_FIELDS.map((name): [string, FieldType] => [name, 'number']),
    ...CHURN_FIELDS.map((name): [string, FieldType] => [name, 'date']),
    ['owner', 'owner'],
    ['tags', 'tags'],
    // The record's own id, so that a list of named records is a search.
    ['external_id', 'external_id'],
  ]),
  contact: new Map<string, FieldType>([
    ['name', 'string'],
    ['engagementscore', 'number'],
    ['engagementscore_difference', 'number'],
    ['last_seen', 'date'],
    ['tags', 'tags'],
    ['customer_external_id', 'external_id'],
    ['external_id', 'external_id'],
  ]),
}

export const CUSTOMER_ONLY_FIELDS: ReadonlySet<string> = new Set([
  'fitscore',
  'churn_risk',
  'upsell_score',
  'churn_probability',
  'is_churned',
  'owner',
  ...PAST_FIELDS,
  ...CHURN_FIELDS,
])
export const CONTACT_ONLY_FIELDS: ReadonlySet<string> = new Set(['customer_external_id'])

// Negative operators are stored as their positive base plus `negated`, so the SQL derives
// NEQ/NLIKE/NIN/UNKNOWN as exact complements of the positive conditions by one rule
// (predicates.ts).
export type PositiveOp = 'IN' | 'LT' | 'LTE' | 'GT' | 'GTE' | 'LIKE' | 'GTD' | 'LTD' | 'KNOWN'
export type Operand = 'one' | 'many' | 'days' | 'none'

export const OPERATOR_SHAPES: Record<
  Operator,
  { base: PositiveOp; negated: boolean; operand: Operand }
> = {
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
  return type === 'owner' || type === 'tags' || type === 'external_id' ? 'string' : type
}
