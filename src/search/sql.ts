// Search compiler: a filter list or tree plus the account's property catalog become one
// parameterised query for postgres.js `sql.unsafe(text, params)`: the criteria (criteria.ts) as
// conditions (predicates.ts), and the page of records around them, or their count. Every
// user-supplied string (codenames, values, ids) travels as a bound parameter with an explicit cast.
import { TABLES } from '../db/tables.ts'
import { type FieldError, refuse } from '../errors.ts'
import { checkProperties, collectTree, type Lookups } from './criteria.ts'
import {
  type Conditions,
  type Criterion,
  type Entity,
  type Field,
  isNode,
  leavesOf,
  type PropertyDef,
  type SortSpec,
  type Tree,
} from './fields.ts'
import { afterSql, columnsSql, joinsSql, propertiesSql } from './columns.ts'
import { afterKeysSql, indexedFirst, KEY_TEXT, keySql, splitPage } from './keyset.ts'
import { coreSql, type Ctx, type SqlType, treeSql } from './predicates.ts'
import {
  type CursorValues,
  cursorScope,
  openCursor,
  resolveSort,
  type SortKey,
  sealCursor,
} from './sort.ts'

// What every statement over the matching records takes: the condition and where it applies.
export type MatchInput = Conditions & {
  entity: Entity
  accountId: number | string
  catalog: readonly PropertyDef[]
  today: string
  // Required when the conditions use owner or tags.
  lookups?: Lookups
}

export type SearchInput = MatchInput & {
  properties?: readonly string[]
  limit: number
  // The page starts after this record (of the searched entity, in the account); when there is no
  // such record the page is empty, and the caller tells why. Unsorted searches only.
  afterServiceId?: number
  // Up to MAX_SORT keys, ahead of the external ID that always ends the order.
  sort?: readonly SortSpec[]
  // Sorted searches: the page starts after this cursor (a previous page's `next`), which is sealed
  // and opened with cursorKey; without the key a sorted page has no `next` and takes no cursor.
  afterCursor?: string
  cursorKey?: Uint8Array
  // One record by external ID (the single-record read endpoints).
  externalId?: string
  // Each record as one JSON text rendered by Postgres (column `json`, beside `service_id`), so that
  // a page goes out without being parsed and serialized again.
  json?: boolean
}

export interface CompiledSearch {
  text: string
  params: unknown[]
  // Sorted searches: the text of a row's `cursor` column as the cursor of the page after that row.
  next?: (cursor: string) => string
}

// What begin reads: a match, and what a page adds to it.
type BeginInput = MatchInput &
  Partial<
    Pick<
      SearchInput,
      'limit' | 'properties' | 'sort' | 'afterServiceId' | 'afterCursor' | 'cursorKey'
    >
  >

// The sort keys, and the values of the cursor the page starts after (each problem in `errors`).
function sortOf(input: BeginInput, defs: ReadonlyMap<string, PropertyDef>, errors: FieldError[]) {
  const keys = resolveSort(input.entity, input.sort ?? [], defs, errors)
  if (keys.length > 0 && input.afterServiceId !== undefined) {
    errors.push({
      path: '/after',
      message: 'under a sort, must be the string paging.next.after of the previous page',
    })
  }
  if (input.afterCursor === undefined || errors.length > 0) return { keys }
  const scope = cursorScope(input.accountId, input.entity, keys)
  const after =
    input.cursorKey && openCursor(input.afterCursor, input.cursorKey, scope, keys.length)
  if (!after) {
    const message =
      'is not a cursor of this search: send paging.next.after of the previous page, with the same sort'
    errors.push({ path: '/after', message })
  }
  return { keys, after }
}

export const INVALID_SEARCH = 'The search request is invalid.'

// The input's condition and sort, checked against the account's catalog (and a cursor against its
// search): each problem in `errors`, after the caller's own. The body's schema has
// checked its shape.
function checked(input: BeginInput, errors: FieldError[]) {
  const tree = collectTree(input.entity, input, input.catalog, errors)
  const { keys, after } = sortOf(input, new Map(input.catalog.map((d) => [d.codename, d])), errors)
  if (input.properties) checkProperties(input.entity, input.properties, input.catalog, errors)
  return { tree, keys, after }
}

// A search checked against the catalog (checkSearch): compileSearch and compileCount take it as it
// is, so that a request's search is checked once, however many statements it compiles.
export interface CheckedSearch {
  input: SearchInput
  tree: Tree<Criterion>
  keys: SortKey[]
  after?: CursorValues
}

// Every problem of a search, for a caller that reports its own beside them (records/search.ts), or
// the checked search when there is none.
export function checkSearch(
  input: SearchInput,
):
  | { problems: FieldError[]; search?: undefined }
  | { problems?: undefined; search: CheckedSearch } {
  const errors: FieldError[] = []
  const search = { input, ...checked(input, errors) }
  return errors.length > 0 ? { problems: errors } : { search }
}

// A context that binds one statement's parameters.
function bound(input: BeginInput) {
  const params: string[] = []
  // Every scalar parameter is declared text and cast in SQL: postgres.js serializes a parameter by
  // the type the server reports for it, and its boolean and date serializers mangle strings
  // ('true' becomes 'f'). An array is declared its own type, which postgres.js sends as the literal
  // it is given: the server reads it once, at Bind, and the planner holds it as a constant, which
  // it hashes for `= any(...)`. Cast from text, it would stay an expression (array_in is only
  // stable), read again for every row (docs/benchmarks.md, "IN lists at 30,000 customers").
  const bind = (value: string, type: SqlType): string => {
    params.push(value)
    const n = params.length
    return type === 'text' || type.endsWith('[]') ? `$${n}::${type}` : `$${n}::text::${type}`
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
  return { ctx, params }
}

// The input's condition and sort, checked (or a 400 whose detail is `refusal`, with every problem
// of the input after the caller's own `errors`), and a context that binds one statement's
// parameters.
function begin(input: BeginInput, refusal: string, errors: FieldError[] = []) {
  const { tree, keys, after } = checked(input, errors)
  if (errors.length > 0) refuse(400, refusal, errors)
  return { tree, keys, after, ...bound(input) }
}

// A search's input, checked here, or a search checked already, which is not checked again.
const begun = (search: SearchInput | CheckedSearch) =>
  'tree' in search
    ? { ...search, ...bound(search.input) }
    : { input: search, ...begin(search, INVALID_SEARCH) }

// Top-level ANDs as separate conditions, so that the interface's filters compile one
// condition each.
const conjuncts = (t: Tree<Criterion>): Tree<Criterion>[] =>
  isNode(t) && 'and' in t ? t.and.flatMap(conjuncts) : [t]

const isOr = (t: Tree<Criterion>): t is { or: readonly Tree<Criterion>[] } =>
  isNode(t) && 'or' in t && t.or.length > 1

// The account's records `r` that the condition matches: the table with the joins the condition
// (and the sort keys or the statement's own `fields`) read, and the conditions, to be ANDed. With
// `split`, a top-level OR is left out of `where` and its groups come as `groups` instead, each to
// be ANDed with `where` on its own.
function matchSql(
  ctx: Ctx,
  tree: Tree<Criterion>,
  fields: readonly Pick<Field, 'source' | 'name'>[] = [],
  split = false,
): { from: string; where: string[]; groups: string[] } {
  const joins = joinsSql(ctx)
  const read = [...leavesOf(tree).map((c) => c.field), ...fields]
  const reads = (alias: string) =>
    read.some(
      (f) => f.source === 'core' && new RegExp(`\\b${alias}\\.`).test(coreSql(f.name, ctx) ?? ''),
    )
  const from = [
    `${TABLES[ctx.entity].records} r`,
    reads('h') ? joins.scores : '',
    reads('oc') ? joins.customer : '',
  ]
  const parts = conjuncts(tree)
  const or = split ? parts.find(isOr) : undefined
  return {
    from: from.filter(Boolean).join(' '),
    where: [
      `r.account_id = ${ctx.account}`,
      ...parts.filter((c) => c !== or).map((c) => treeSql(c, ctx)),
    ],
    groups: or ? or.or.map((g) => treeSql(g, ctx)) : [],
  }
}

// One page of records in the sort's order, external ID last (alone when there is no sort); it asks
// for limit + 1 rows so the caller can tell whether a next page exists. A sorted page's rows end
// with `cursor`, the text of its keys' values and its external ID.
export function compileSearch(search: SearchInput | CheckedSearch): CompiledSearch {
  const { input, tree, keys, after, ctx, params } = begun(search)
  const columns = columnsSql(ctx, propertiesSql(input.properties, ctx))
  const match = matchSql(ctx, tree, keys, keys.length === 0)
  const where = [
    ...match.where,
    ...(input.afterServiceId === undefined
      ? []
      : [`r.external_id > (${afterSql(ctx, ctx.bind(String(input.afterServiceId), 'bigint'))})`]),
    ...(input.externalId === undefined
      ? []
      : [`r.external_id = ${ctx.bind(input.externalId, 'text')}`]),
  ]
  const order = (of: (i: number) => string) => [
    ...keys.map((k, i) => `${of(i)} ${k.descending ? 'desc' : 'asc'} nulls last`),
    'r.external_id',
  ]
  const limit = ctx.bind(String(input.limit + 1), 'integer')
  const sortColumns = keys.map((k, i) => `, ${keySql(k, ctx)} as sort_${i}`).join('')
  const cut = (conditions: string[], orderBy: string[]) =>
    [
      `select r.*${sortColumns} from ${match.from}`,
      `where ${[...where, ...conditions].join('\n  and ')}`,
      `order by ${orderBy.join(', ')}`,
      `limit ${limit}`,
    ].join('\n')
  // An unsorted page under an OR reads each group's own page, which the group's own index can find
  // (a walk in external-ID order testing the OR on every record finds a rare match late), then
  // cuts their union: an OR costs what its groups' searches cost, each on its own.
  const union = (groups: string[]) =>
    `select distinct on (r.external_id) r.* from (${groups
      .map((g) => `(${cut([g], ['r.external_id'])})`)
      .join('\nunion all\n')}) r\norder by r.external_id\nlimit ${limit}`
  const page = indexedFirst(keys)
    ? splitPage(keys, after, ctx, cut, limit)
    : match.groups.length > 0
      ? union(match.groups)
      : cut(
          after ? [afterKeysSql(keys, after, ctx)] : [],
          order((i) => `sort_${i}`),
        )
  const cursor = `json_build_array(${[...keys.map((k, i) => KEY_TEXT[k.type](`r.sort_${i}`)), 'r.external_id']})`
  // The page is cut first, joining only what its conditions and keys read; the columns' joins come
  // after, so that the matches of a broad filter are not all joined before the sort and the limit.
  const joins = joinsSql(ctx)
  const text = [
    `select ${input.json ? 'row_to_json(x)::text as json, r.service_id' : 'x.*'}`,
    ...(keys.length > 0 ? [`, ${cursor}::text as cursor`] : []),
    `from (${page}`,
    `) r ${[joins.scores, joins.customer].filter(Boolean).join(' ')}`,
    `cross join lateral (select ${columns.join(',\n  ')}) x`,
    `order by ${order((i) => `r.sort_${i}`).join(', ')}`,
  ].join('\n')
  const key = input.cursorKey
  if (keys.length === 0 || !key) return { text, params }
  const scope = cursorScope(input.accountId, input.entity, keys)
  return { text, params, next: (last) => sealCursor(JSON.parse(last), key, scope) }
}

// All the records the search matches, paging aside: their number (column `total`), or the
// planner's estimate of it, EXPLAIN's rows of the matching records (`estimate`),
// planned, never run.
export function compileCount(
  search: SearchInput | CheckedSearch,
  estimate: boolean,
): CompiledSearch {
  const { tree, ctx, params } = begun(search)
  const { from, where } = matchSql(ctx, tree)
  const match = `from ${from}\nwhere ${where.join('\n  and ')}`
  return {
    text: estimate
      ? `explain (format json) select 1 ${match}`
      : `select count(*) as total ${match}`,
    params,
  }
}

// The records the search matches, paging aside (columns service_id and external_id): the set a
// saved segment holds.
export function compileMembers(input: MatchInput): CompiledSearch {
  const { tree, ctx, params } = begin(input, "The segment's search is invalid.")
  const { from, where } = matchSql(ctx, tree)
  return {
    text: `select r.service_id, r.external_id from ${from}\nwhere ${where.join('\n  and ')}`,
    params,
  }
}

// The matching records for a statement built elsewhere (src/search/aggregate.ts): FROM, joining
// what the condition and `fields` read, WHERE, and the context to bind the statement's own
// parameters with. `errors` are the caller's problems, refused in one 400 with the condition's.
export function compileMatch(input: MatchInput, fields: readonly Field[], errors: FieldError[]) {
  const { tree, ctx, params } = begin(input, 'The aggregate request is invalid.', errors)
  return { ...matchSql(ctx, tree, fields), ctx, params }
}
