// Search criteria: a request's filters checked against the fields and the account's property
// catalog, parsed into typed criteria (or every problem, with its path).
import type { FieldError } from '../errors.ts'
import { cut, meant, UNSTORABLE } from '../validate.ts'
import { operandValues } from './operands.ts'
import {
  ALLOWED_OPERATORS,
  type Condition,
  type Conditions,
  CONTACT_ONLY_FIELDS,
  CORE_FIELDS,
  CUSTOMER_ONLY_FIELDS,
  type Criterion,
  type Entity,
  type Field,
  type Filter,
  isNode,
  leavesOf,
  PAST_FIELDS,
  OPERATOR_SHAPES,
  type Operator,
  OPERATORS,
  type PropertyDef,
  type SortSpec,
  TIMESTAMP_FIELDS,
  type Tree,
  valueTypeOf,
} from './fields.ts'

export type Defs = ReadonlyMap<string, PropertyDef>

// A field by name, or why there is none.
export function lookupField(entity: Entity, name: string, catalog: Defs): Field | string {
  if (entity === 'contact' && CUSTOMER_ONLY_FIELDS.has(name))
    return `${name} is a customer-only field`
  if (entity === 'customer' && CONTACT_ONLY_FIELDS.has(name))
    return `${name} is a contact-only field`
  // Core fields win over custom codenames of the same name.
  const core = CORE_FIELDS[entity].get(name)
  if (core) return { source: 'core', name, type: core }
  const def = catalog.get(name)
  if (def) return { source: def.kind, name, type: def.type }
  return unknownProperty(name, [...CORE_FIELDS[entity].keys(), ...catalog.keys()])
}

// A short catalog is listed whole in the message naming an unknown property; a long one is not.
const LISTED_PROPERTIES = 30

// Names the property a typo or a word of it most likely meant and, when there are few, the
// properties there are.
const unknownProperty = (name: string, names: string[]) => {
  const likely = meant(name, names)
  const listed = names.length <= LISTED_PROPERTIES ? `; the properties are ${names.join(', ')}` : ''
  return `unknown property ${JSON.stringify(cut(name))}${likely ? ` (did you mean ${likely}?)` : ''}${listed}`
}

function resolveFilter(
  entity: Entity,
  filter: Filter,
  at: string,
  catalog: Defs,
  errors: FieldError[],
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
    const what = known
      ? `operator ${filter.operator} is not allowed`
      : `unknown operator ${JSON.stringify(cut(filter.operator))}`
    errors.push({
      path: `${at}/operator`,
      message: `${what} for ${field.name} (${field.type}); allowed: ${allowed.join(', ')}`,
    })
    return undefined
  }
  const shape = OPERATOR_SHAPES[operator]
  const before = errors.length
  const operands = operandValues(filter, shape.operand, valueTypeOf(field.type), at, errors)
  if (errors.length > before) return undefined
  return { field, op: shape.base, negated: shape.negated, operands }
}

// Active customers only, unless the request constrains is_churned itself.
const ACTIVE_ONLY: Criterion = {
  field: { source: 'core', name: 'is_churned', type: 'boolean' },
  op: 'IN',
  negated: false,
  operands: [false],
}

// The tree with each filter resolved, or undefined where one failed (its errors are in `errors`).
function resolveTree(
  entity: Entity,
  t: Condition,
  at: string,
  defs: Defs,
  errors: FieldError[],
): Tree<Criterion> | undefined {
  if (!isNode(t)) return resolveFilter(entity, t, at, defs, errors)
  const all = (key: 'and' | 'or', items: readonly Condition[]) => {
    const children = items.map((c, i) => resolveTree(entity, c, `${at}/${key}/${i}`, defs, errors))
    return children.every((c) => c !== undefined) ? children : undefined
  }
  if ('not' in t) {
    const not = resolveTree(entity, t.not, `${at}/not`, defs, errors)
    return not && { not }
  }
  if ('and' in t) {
    const and = all('and', t.and)
    return and && { and }
  }
  const or = all('or', t.or)
  return or && { or }
}

// The request's condition with every filter resolved against the catalog (each problem in
// `errors`): its filters as an AND node, or its where tree, ANDed with the churn default. The
// default holds unless the request constrains is_churned, which it does when any filter, or any
// leaf anywhere in the tree (under OR and NOT too), names is_churned: then the request alone
// decides which customers are in.
export function collectTree(
  entity: Entity,
  { filters = [], where }: Conditions,
  catalog: readonly PropertyDef[],
  errors: FieldError[],
): Tree<Criterion> {
  const defs = new Map(catalog.map((d) => [d.codename, d]))
  // A tree with a filter that failed to resolve is only ever reported, never compiled.
  const tree = (where && resolveTree(entity, where, '/where', defs, errors)) ?? {
    and: filters.flatMap((f, i) => resolveFilter(entity, f, `/filters/${i}`, defs, errors) ?? []),
  }
  const leaves = where ? leavesOf(where) : filters
  const churnFiltered = leaves.some((f) => f.propertyName === 'is_churned')
  return entity === 'customer' && !churnFiltered ? { and: [tree, ACTIVE_ONLY] } : tree
}

export function checkProperties(
  entity: Entity,
  properties: readonly string[],
  catalog: readonly PropertyDef[],
  errors: FieldError[],
): void {
  const names = [...catalog.map((d) => d.codename), ...(entity === 'customer' ? PAST_FIELDS : [])]
  const known = new Set(names)
  properties.forEach((p, i) => {
    if (!known.has(p)) errors.push({ path: `/properties/${i}`, message: unknownProperty(p, names) })
  })
}

// The account's user and tag ids named by owner and tags operands, keyed by the operand exactly as
// sent; the caller resolves them (emails and titles match case-insensitively) before compiling.
// An operand missing from its map names nothing.
export interface Lookups {
  users: ReadonlyMap<string, number>
  tags: ReadonlyMap<string, number>
}

interface ContextNeeds {
  // The request names a custom property (a filter or sort key on anything but a core field, or
  // `properties`).
  catalog: boolean
  // The owner and tags operands to look up.
  emails: string[]
  titles: string[]
}

// What a request needs from the database before it can be compiled, read from the raw request
// (before validation: what a filter that turns out invalid needs is merely unused). A request
// needing nothing compiles with an empty catalog and no lookups.
export function contextNeeds(
  entity: Entity,
  { filters = [], where }: Conditions,
  properties?: readonly string[],
  sort: readonly SortSpec[] = [],
): ContextNeeds {
  const leaves = where ? leavesOf(where) : filters
  // A string Postgres cannot hold is not sent to it; the compiler rejects it as a value anyway.
  const operands = (name: string) => [
    ...new Set(
      leaves
        .filter((f) => f.propertyName === name)
        .flatMap((f) =>
          [f.value, ...(Array.isArray(f.values) ? f.values : [])].filter(
            (x): x is string => typeof x === 'string' && !UNSTORABLE.test(x),
          ),
        ),
    ),
  ]
  return {
    catalog:
      properties !== undefined ||
      [...leaves, ...sort].some(
        (f) => !CORE_FIELDS[entity].has(f.propertyName) && !TIMESTAMP_FIELDS.has(f.propertyName),
      ),
    emails: entity === 'customer' ? operands('owner') : [],
    titles: operands('tags'),
  }
}
