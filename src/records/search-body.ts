// A search body: its shapes and limits, shared by the search, segment and aggregate bodies. What
// depends on the account's catalog (codenames, an operator for a field's type, values of the type)
// the compiler (src/search/) checks.
import * as v from 'valibot'
import { closest, isObject, strict } from '../validate.ts'
import {
  type Condition,
  type Conditions,
  DIRECTIONS,
  type Filter,
  leavesOf,
  NODE_KEYS,
  OPERATORS,
} from '../search/fields.ts'

const MAX_FILTERS = 10
// A where tree: and/or/not nodes on the way from its top to any leaf, and leaves in all.
export const MAX_TREE_DEPTH = 4
export const MAX_LEAVES = 50
const MAX_LIMIT = 1000
const MAX_SORT = 3
// Each IN value and selected codename becomes one bound parameter; the caps keep a 5 MB body from
// outgrowing Postgres' 65535 parameters.
const MAX_LIST = 1000
// IN/NIN values across all the filters of a request: the values of a request bound its cost,
// however they are spread over its leaves.
const MAX_VALUES = 5000
// A LIKE/NLIKE value: the substring test and a trigram index's lookup grow with its length.
const MAX_PATTERN = 256

// What each operator takes, as the compiler reads a filter (src/search/criteria.ts): IN and NIN a
// non-empty `values`, or one `value` when `values` is absent; KNOWN and UNKNOWN nothing (a value
// sent is not read); the others a `value`, of at most MAX_PATTERN characters for LIKE and NLIKE.
// Each part is open, as the filter's own additionalProperties already names every key (and
// documentation linters read a schema with properties and no additionalProperties as closed).
const LISTS = ['IN', 'NIN']
const NONE = ['KNOWN', 'UNKNOWN']
const PATTERNS = ['LIKE', 'NLIKE']
const open = (schema: Record<string, unknown>, required: string[] = []) => ({
  ...schema,
  ...(required.length > 0 && { required }),
  additionalProperties: true,
})
const isOne = (operators: string[]) =>
  open({ properties: { operator: { enum: operators } } }, ['operator'])
const value = { type: 'string' }
// As a chain of if/then/else, which generated clients leave out of their types (as they do `not`).
const OPERANDS = {
  if: isOne(LISTS),
  then: open({
    properties: { values: { type: 'array', minItems: 1 } },
    anyOf: [
      open({ properties: { values: { type: 'array' } } }, ['values']),
      open({ properties: { value } }, ['value']),
    ],
  }),
  else: {
    if: isOne(NONE),
    else: open(
      {
        properties: { value },
        if: isOne(PATTERNS),
        then: open({ properties: { value: { ...value, maxLength: MAX_PATTERN } } }),
      },
      ['value'],
    ),
  },
}

// The operator is checked against the field's type by the compiler, which names what the field
// allows; the document lists every operator.
const SearchFilter = v.pipe(
  strict({
    propertyName: v.string(),
    operator: v.pipe(v.string(), v.metadata({ enum: [...OPERATORS] })),
    value: v.optional(v.string()),
    values: v.optional(
      v.pipe(v.array(v.string()), v.maxLength(MAX_LIST, `At most ${MAX_LIST} values.`)),
    ),
  }),
  v.forward(
    v.partialCheck(
      [['operator'], ['value']],
      (f) => !['LIKE', 'NLIKE'].includes(f.operator) || (f.value ?? '').length <= MAX_PATTERN,
      `At most ${MAX_PATTERN} characters for LIKE and NLIKE.`,
    ),
    ['value'],
  ),
  v.metadata(OPERANDS),
)

const valuesIn = (filters: readonly Filter[]) =>
  filters.reduce((n, f) => n + (f.values?.length ?? 0), 0)
const fewValues = <T>(leaves: (t: T) => readonly Filter[]) =>
  v.check(
    (t: T) => valuesIn(leaves(t)) <= MAX_VALUES,
    (issue) =>
      `At most ${MAX_VALUES} values in all the filters together (this has ${valuesIn(leaves(issue.input))}).`,
  )

// The node an object is meant as: the one whose key it has or, when it has no propertyName, whose
// key one of its keys is a typo of (strict() then names the key it meant); a filter otherwise.
const nodeKey = (input: unknown) => {
  if (!isObject(input) || Object.hasOwn(input, 'propertyName')) return undefined
  const keys = Object.keys(input)
  return (
    NODE_KEYS.find((k) => keys.includes(k)) ??
    keys.map((k) => closest(k, [...NODE_KEYS])).find(Boolean)
  )
}

const TOO_DEEP = v.custom<Condition>(
  () => false,
  `At most ${MAX_TREE_DEPTH} nested and/or/not nodes.`,
)

const nodesOver = (child: v.GenericSchema<Condition>) => {
  const list = v.pipe(v.array(child), v.minLength(1, 'Must have at least one condition.'))
  return { and: strict({ and: list }), or: strict({ or: list }), not: strict({ not: child }) }
}

// A condition under `depth` nodes. Each level is a schema of its own, whose nodes hold the next
// level's conditions; the last holds filters only, so no body recurses deeper however it nests.
const conditionAt = (depth: number): v.GenericSchema<Condition> => {
  const nodes = depth < MAX_TREE_DEPTH ? nodesOver(conditionAt(depth + 1)) : undefined
  return v.lazy((input) => {
    const key = nodeKey(input) as (typeof NODE_KEYS)[number] | undefined
    return key === undefined ? SearchFilter : (nodes?.[key] ?? TOO_DEEP)
  }) as v.GenericSchema<Condition>
}

// The tree as the document publishes it (the component Where): recursive, where the validator above
// unrolls its levels to stop at MAX_TREE_DEPTH, which the description states.
export const Where: v.GenericSchema = v.union([
  SearchFilter,
  strict({ and: v.pipe(v.array(v.lazy(() => Where)), v.minLength(1)) }),
  strict({ or: v.pipe(v.array(v.lazy(() => Where)), v.minLength(1)) }),
  strict({ not: v.lazy(() => Where) }),
])

const WHERE =
  `A tree instead of filters: a filter object, or a node {"and": [conditions]}, {"or": [conditions]} or
{"not": condition}, whose conditions are again filter objects or nodes. At most ${MAX_TREE_DEPTH} nodes on the way from
the top to any filter and ${MAX_LEAVES} filters in all; not together with filters. Customer search is limited to
active customers unless a filter anywhere in the tree names is_churned.`.replaceAll('\n', ' ')

const COUNT =
  `"exact" adds total, the number of matching records (paging aside); "estimate" adds the query
planner's estimate of it as total, with total_is_estimate: true, at no scan cost.`.replaceAll(
    '\n',
    ' ',
  )

const SORT =
  `Up to ${MAX_SORT} keys, each {"propertyName", "direction": "asc" (the default) or "desc"}: a core
field (the scores, last_seen, name, is_churned, external_id, customer_external_id for contacts, createdAt,
updatedAt), a custom attribute or a metric (its value in the latest snapshot). Records without a value come last
in either direction, and the external ID (in byte order) decides last. Under a sort, paging.next.after is an
opaque string.`.replaceAll('\n', ' ')

const SortKey = strict({
  propertyName: v.string(),
  direction: v.optional(v.picklist(DIRECTIONS, 'Must be "asc" or "desc".')),
})

const AFTER =
  `The next page: paging.next.after of the previous page, as it came (a record's service_id, or
under a sort an opaque cursor, refused with a 400 when altered or from another search).`.replaceAll(
    '\n',
    ' ',
  )

// What a body searches by, shared by the search, segment and aggregate bodies: shapes and ranges
// here; codenames, operators and values against the account's catalog in the compiler, which
// reports them with the same kind of paths.
export const conditions = {
  filters: v.optional(
    v.pipe(
      v.array(SearchFilter),
      v.maxLength(MAX_FILTERS, `At most ${MAX_FILTERS} filters.`),
      fewValues((fs: Filter[]) => fs),
    ),
  ),
  where: v.optional(
    v.pipe(
      conditionAt(0),
      v.check((t) => leavesOf(t).length <= MAX_LEAVES, `At most ${MAX_LEAVES} filters in a tree.`),
      fewValues((t: Condition) => leavesOf(t)),
      v.description(WHERE),
      v.metadata({ published: Where }),
    ),
  ),
}
const searchEntries = {
  ...conditions,
  count: v.optional(
    v.pipe(
      v.picklist(['exact', 'estimate'], 'Must be "exact" or "estimate".'),
      v.description(COUNT),
    ),
  ),
  properties: v.optional(
    v.pipe(
      v.array(v.string()),
      v.maxLength(MAX_LIST, `At most ${MAX_LIST} codenames.`),
      v.description(
        'The custom values shown (all by default); for customers also engagementscore_7d_ago and the like.',
      ),
    ),
  ),
  limit: v.optional(
    v.pipe(
      v.number(),
      v.integer('Must be an integer.'),
      v.minValue(1, 'At least 1.'),
      v.maxValue(MAX_LIMIT, `At most ${MAX_LIMIT}.`),
    ),
    100,
  ),
  sort: v.optional(
    v.pipe(
      v.array(SortKey),
      v.maxLength(MAX_SORT, `At most ${MAX_SORT} sort keys.`),
      v.description(SORT),
    ),
  ),
  after: v.optional(
    v.pipe(
      v.union(
        [
          v.pipe(v.number(), v.safeInteger()),
          v.pipe(v.string(), v.minLength(1), v.maxLength(4096)),
        ],
        'Must be paging.next.after of the previous page.',
      ),
      v.description(AFTER),
    ),
  ),
}
// A strict body of these entries that holds filters or where, not both.
const bothRefused = v.forward(
  v.partialCheck(
    [['filters'], ['where']],
    (b: { filters?: unknown; where?: unknown }) => b.filters === undefined || b.where === undefined,
    'Send filters or where, not both.',
  ),
  ['where'],
)
export const oneCondition = <E extends v.ObjectEntries & typeof conditions>(entries: E) => {
  const body = strict(entries)
  type Body = v.InferOutput<typeof body>
  return v.pipe(
    body,
    bothRefused as unknown as v.BaseValidation<Body, Body, v.BaseIssue<unknown>>,
    v.metadata({
      not: {
        type: 'object',
        properties: { filters: {}, where: {} },
        required: ['filters', 'where'],
      },
    }),
  )
}
// A cursor names its place in the order it was made for: a record's service_id without a sort,
// the values of the sort keys under one.
const afterFitsSort = v.forward(
  v.partialCheck(
    [['sort'], ['after']],
    (b: { sort?: unknown[]; after?: unknown }) =>
      b.after === undefined ||
      (typeof b.after === 'string') === (b.sort !== undefined && b.sort.length > 0),
    'Must be paging.next.after of the previous page: a number without sort, a string under a sort.',
  ),
  ['after'],
)
const searchBody = oneCondition(searchEntries)
type Body = v.InferOutput<typeof searchBody>
export const SearchBody = v.pipe(
  searchBody,
  afterFitsSort as unknown as v.BaseValidation<Body, Body, v.BaseIssue<unknown>>,
  // The check above, as the document states it (open, as the filters' alternatives are).
  v.metadata({
    if: open({ properties: { sort: { type: 'array', minItems: 1 } } }, ['sort']),
    then: open({ properties: { after: { type: 'string' } } }),
    else: open({ properties: { after: { type: 'integer' } } }),
  }),
)
// A search body splits in two: what picks and orders the records, which a segment saves, and what
// pages and shapes one answer, which a segment's member search sends.
const { count: _count, properties, limit, after, ...rest } = searchEntries
export const selection = rest
export const PageBody = strict({ properties, limit, after })
export type PageBody = v.InferOutput<typeof PageBody>
export const savedSearch = <E extends v.ObjectEntries>(entries: E) =>
  oneCondition({ ...entries, ...selection })
export type SearchBody = v.InferOutput<typeof SearchBody>

// What a body (a search's, a segment's or an aggregate's) searches by.
export const conditionsOf = (body: Pick<SearchBody, 'filters' | 'where'>): Conditions =>
  body.where === undefined ? { filters: body.filters } : { where: body.where }
