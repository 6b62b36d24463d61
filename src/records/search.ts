import * as v from 'valibot'
import { closest, isObject, strict } from '../validate.ts'
import { catalogSql } from '../admin/properties.ts'
import type { Entity, PropertyDef } from '../catalog.ts'
import type { App } from '../context.ts'
import { budgeted, type Caller, type Track } from '../db/budget.ts'
import type { Sql, Tx } from '../db/client.ts'
import { TABLES } from '../db/tables.ts'
import { today } from '../dates.ts'
import { type FieldError, refuse } from '../errors.ts'
import { contextNeeds } from '../search/criteria.ts'
import {
  type Condition,
  type Conditions,
  type Filter,
  leavesOf,
  DIRECTIONS,
  NODE_KEYS,
  OPERATORS,
} from '../search/fields.ts'
import { compileCount, compileSearch, INVALID_SEARCH, type SearchInput, searchProblems } from '../search/sql.ts'

// The shapes and limits of a search body; what depends on the account's catalog (codenames, an
// operator for a field's type, values of the type) the compiler (src/search/) checks.
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

// The operator is checked against the field's type by the compiler, which names what the field
// allows; the document lists every operator.
const SearchFilter = v.pipe(
  strict({
    propertyName: v.string(),
    operator: v.pipe(v.string(), v.metadata({ enum: [...OPERATORS] })),
    value: v.optional(v.string()),
    values: v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_LIST, `At most ${MAX_LIST} values.`))),
  }),
  v.forward(
    v.partialCheck(
      [['operator'], ['value']],
      (f) => !['LIKE', 'NLIKE'].includes(f.operator) || (f.value ?? '').length <= MAX_PATTERN,
      `At most ${MAX_PATTERN} characters for LIKE and NLIKE.`,
    ),
    ['value'],
  ),
)

const valuesIn = (filters: readonly Filter[]) => filters.reduce((n, f) => n + (f.values?.length ?? 0), 0)
const fewValues = <T>(leaves: (t: T) => readonly Filter[]) =>
  v.check(
    (t: T) => valuesIn(leaves(t)) <= MAX_VALUES,
    (issue) => `At most ${MAX_VALUES} values in all the filters together (this has ${valuesIn(leaves(issue.input))}).`,
  )

// The node an object is meant as: the one whose key it has or, when it has no propertyName, whose
// key one of its keys is a typo of (strict() then names the key it meant); a filter otherwise.
const nodeKey = (input: unknown) => {
  if (!isObject(input) || Object.hasOwn(input, 'propertyName')) return undefined
  const keys = Object.keys(input)
  return NODE_KEYS.find((k) => keys.includes(k)) ?? keys.map((k) => closest(k, [...NODE_KEYS])).find(Boolean)
}

const TOO_DEEP = v.custom<Condition>(() => false, `At most ${MAX_TREE_DEPTH} nested and/or/not nodes.`)

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

const WHERE = `A tree instead of filters: a filter object, or a node {"and": [conditions]}, {"or": [conditions]} or
{"not": condition}, whose conditions are again filter objects or nodes. At most ${MAX_TREE_DEPTH} nodes on the way from
the top to any filter and ${MAX_LEAVES} filters in all; not together with filters. Customer search is limited to
active customers unless a filter anywhere in the tree names is_churned.`.replaceAll('\n', ' ')

const COUNT = `"exact" adds total, the number of matching records (paging aside); "estimate" adds the query
planner's estimate of it as total, with total_is_estimate: true, at no scan cost.`.replaceAll('\n', ' ')

const SORT = `Up to ${MAX_SORT} keys, each {"propertyName", "direction": "asc" (the default) or "desc"}: a core
field (the scores, last_seen, name, is_churned, customer_external_id for contacts, createdAt, updatedAt), a custom
attribute or a metric (its value in the latest snapshot). Records without a value come last in either direction,
and the external ID (in byte order) decides last. Under a sort, paging.next.after is an opaque string.`.replaceAll(
  '\n',
  ' ',
)

const SortKey = strict({
  propertyName: v.string(),
  direction: v.optional(v.picklist(DIRECTIONS, 'Must be "asc" or "desc".')),
})

const AFTER = `The next page: paging.next.after of the previous page, as it came (a record's service_id, or
under a sort an opaque cursor, refused with a 400 when altered or from another search).`.replaceAll('\n', ' ')

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
  count: v.optional(v.pipe(v.picklist(['exact', 'estimate'], 'Must be "exact" or "estimate".'), v.description(COUNT))),
  properties: v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_LIST, `At most ${MAX_LIST} codenames.`))),
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
    v.pipe(v.array(SortKey), v.maxLength(MAX_SORT, `At most ${MAX_SORT} sort keys.`), v.description(SORT)),
  ),
  after: v.optional(
    v.pipe(
      v.union(
        [v.pipe(v.number(), v.safeInteger()), v.pipe(v.string(), v.minLength(1), v.maxLength(4096))],
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
    v.metadata({ not: { type: 'object', properties: { filters: {}, where: {} }, required: ['filters', 'where'] } }),
  )
}
// A cursor names its place in the order it was made for: a record's service_id without a sort,
// the values of the sort keys under one.
const afterFitsSort = v.forward(
  v.partialCheck(
    [['sort'], ['after']],
    (b: { sort?: unknown[]; after?: unknown }) =>
      b.after === undefined || (typeof b.after === 'string') === (b.sort !== undefined && b.sort.length > 0),
    'Must be paging.next.after of the previous page: a number without sort, a string under a sort.',
  ),
  ['after'],
)
const searchBody = oneCondition(searchEntries)
type Body = v.InferOutput<typeof searchBody>
export const SearchBody = v.pipe(
  searchBody,
  afterFitsSort as unknown as v.BaseValidation<Body, Body, v.BaseIssue<unknown>>,
)
// A search body splits in two: what picks and orders the records, which a segment saves, and what
// pages and shapes one answer, which a segment's member search sends.
const { count: _count, properties, limit, after, ...rest } = searchEntries
export const selection = rest
export const PageBody = strict({ properties, limit, after })
export type PageBody = v.InferOutput<typeof PageBody>
export const savedSearch = <E extends v.ObjectEntries>(entries: E) => oneCondition({ ...entries, ...selection })
export type SearchBody = v.InferOutput<typeof SearchBody>

// What a body (a search's, a segment's or an aggregate's) searches by.
export const conditionsOf = (body: Pick<SearchBody, 'filters' | 'where'>): Conditions =>
  body.where === undefined ? { filters: body.filters } : { where: body.where }

const NO_CONTEXT = { catalog: [] as PropertyDef[], lookups: { users: new Map(), tags: new Map() } }

// Everything the compiler needs from the database, in one round trip: the account's property
// catalog and the ids of the users and tags that owner and tags operands name. Nothing is cached
// between requests: other processes may change any of it. A request on core fields alone needs
// none of it and skips the round trip.
export const searchContext = async (sql: Sql | Tx, accountId: number, entity: Entity, body: Partial<SearchBody>) => {
  const needs = contextNeeds(entity, conditionsOf(body), body.properties, body.sort)
  if (!needs.catalog && needs.emails.length === 0 && needs.titles.length === 0) return NO_CONTEXT
  const [row] = await sql`
    select
      ${catalogSql(sql, accountId, entity)} as catalog,
      coalesce((
        select json_object_agg(w.v, u.id) from unnest(${needs.emails}::text[]) w(v)
        join users u on u.account_id = ${accountId} and lower(u.email) = lower(w.v)
      ), '{}') as users,
      coalesce((
        select json_object_agg(w.v, t.id) from unnest(${needs.titles}::text[]) w(v)
        join tags t on t.account_id = ${accountId} and lower(t.title) = lower(w.v)
      ), '{}') as tags`
  const ids = (o: Record<string, number>) => new Map(Object.entries(o))
  return { catalog: row.catalog as PropertyDef[], lookups: { users: ids(row.users), tags: ids(row.tags) } }
}

const afterError = async (
  sql: Sql | Tx,
  accountId: number,
  entity: Entity,
  after: number | undefined,
): Promise<FieldError[]> => {
  if (after === undefined) return []
  const [found] =
    await sql`select 1 from ${sql(TABLES[entity].records)} where account_id = ${accountId} and service_id = ${after}`
  return found ? [] : [{ path: '/after', message: `No ${entity} of this account has service_id ${after}.` }]
}

// One page: limit + 1 rows are read, the extra one only telling that a next page exists. `after`
// is resolved inside the query; only an empty page (or a 400 for other reasons) checks whether it
// named a record of the account at all. Postgres renders each row as the interface's Customer or
// Contact object in JSON, and the driver hands over the bytes as they came (raw rows, in the
// query's column order: json, service_id), so the page is joined into the answer as bytes, never
// decoded, parsed or serialized again here.
const [OPEN, COMMA] = [Buffer.from('{"results":['), Buffer.from(',')]
// A count the request asked for, after the results and paging.
interface Total {
  total: number
  estimate: boolean
}
// The answer for a page of raw rows (bench/search's floor server sends the same bytes). Under a
// sort, `next` makes the cursor of the next page from the last row's `cursor` column.
export const pageBody = (rows: Buffer[][], limit: number, count?: Total, next?: (cursor: string) => string) => {
  const results = rows.slice(0, limit)
  const last = results[results.length - 1]
  const after = () => (next ? JSON.stringify(next(last[2].toString('utf8'))) : last[1])
  const paging = rows.length > limit ? `,"paging":{"next":{"after":${after()}}}` : ''
  const total = count ? `,"total":${count.total}${count.estimate ? ',"total_is_estimate":true' : ''}` : ''
  const objects = results.flatMap(([json], i) => (i === 0 ? [json] : [COMMA, json]))
  return Buffer.concat([OPEN, ...objects, Buffer.from(`]${paging}${total}}`)])
}

// Counted in a statement of its own, after the page's: a count reads every match, a page no more
// than it shows. Each has the search's budget (db/budget.ts).
const countOf = async (tx: Tx, track: Track, input: SearchInput, count: 'exact' | 'estimate'): Promise<Total> => {
  const query = compileCount(input, count === 'estimate')
  const [row] = await track(tx.unsafe(query.text, query.params as string[]))
  return count === 'exact'
    ? { total: row.total, estimate: false }
    : { total: row['QUERY PLAN'][0].Plan['Plan Rows'], estimate: true }
}

// The key that seals sorted searches' cursors (sql/014_search_sort.sql): made once per database,
// so that every serve process accepts the cursors of every other, and read once per pool, as it
// never changes.
const cursorKeys = new WeakMap<Sql, Promise<Buffer>>()
const cursorKey = (sql: Sql) => {
  let key = cursorKeys.get(sql)
  if (!key) {
    key = sql`select value from service_secrets where name = 'search_cursor'`.then(([row]) => row.value as Buffer)
    key.catch(() => cursorKeys.delete(sql))
    cursorKeys.set(sql, key)
  }
  return key
}

// What the compiler reads of a body, with its context (searchContext) and, under a sort, the key
// of its cursors.
export const searchInput = (
  accountId: number,
  entity: Entity,
  body: SearchBody,
  context: Awaited<ReturnType<typeof searchContext>>,
  key?: Buffer,
): SearchInput => ({
  entity,
  accountId,
  catalog: context.catalog,
  lookups: context.lookups,
  ...conditionsOf(body),
  properties: body.properties,
  limit: body.limit,
  sort: body.sort,
  afterServiceId: typeof body.after === 'number' ? body.after : undefined,
  afterCursor: typeof body.after === 'string' ? body.after : undefined,
  cursorKey: key,
  json: true,
  today: today(),
})

// A page of the search, as the bytes of the answer, under the search budget (db/budget.ts).
export const searchPage = (app: App, accountId: number, entity: Entity, body: SearchBody, caller?: Caller) =>
  budgeted(app, caller, 'search', async (tx, track) => {
    const sorted = body.sort !== undefined && body.sort.length > 0
    const [context, key] = await Promise.all([
      searchContext(tx, accountId, entity, body),
      sorted ? cursorKey(app.sql) : undefined,
    ])
    const input = searchInput(accountId, entity, body, context, key)
    // Whether `after` names a record is asked only of a request refused anyway, or of an empty page.
    const problems = searchProblems(input)
    if (problems.length > 0) {
      refuse(400, INVALID_SEARCH, [...(await afterError(tx, accountId, entity, input.afterServiceId)), ...problems])
    }
    const query = compileSearch(input)
    const rows = (await track(tx.unsafe(query.text, query.params as string[]).raw())) as unknown as Buffer[][]
    const total = body.count && (await countOf(tx, track, input, body.count))
    if (rows.length === 0) {
      const errors = await afterError(tx, accountId, entity, input.afterServiceId)
      if (errors.length > 0) refuse(400, INVALID_SEARCH, errors)
    }
    return pageBody(rows, body.limit, total || undefined, query.next)
  })
