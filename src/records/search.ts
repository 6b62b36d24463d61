import { catalogSql } from '../catalog/properties.ts'
import type { Entity, PropertyDef } from '../property.ts'
import type { App } from '../context.ts'
import { budgeted, type Caller, READS_ALONE, type Track } from '../db/budget.ts'
import type { Sql, Tx } from '../db/client.ts'
import { TABLES } from '../db/tables.ts'
import { today } from '../dates.ts'
import { type FieldError, refuse } from '../errors.ts'
import { contextNeeds } from '../search/criteria.ts'
import {
  type CheckedSearch,
  checkSearch,
  compileCount,
  compileSearch,
  INVALID_SEARCH,
  type SearchInput,
} from '../search/sql.ts'
import { conditionsOf, type SearchBody } from './search-body.ts'

const NO_CONTEXT = { catalog: [] as PropertyDef[], lookups: { users: new Map(), tags: new Map() } }

// Everything the compiler needs from the database, in one round trip: the account's property
// catalog and the ids of the users and tags that owner and tags operands name. Nothing is cached
// between requests: other processes may change any of it. A request on core fields alone needs
// none of it and skips the round trip.
export const searchContext = async (
  sql: Sql | Tx,
  accountId: number,
  entity: Entity,
  body: Partial<SearchBody>,
) => {
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
  return {
    catalog: row.catalog as PropertyDef[],
    lookups: { users: ids(row.users), tags: ids(row.tags) },
  }
}

const afterError = async (
  sql: Sql | Tx,
  accountId: number,
  entity: Entity,
  after: number | undefined,
): Promise<FieldError[]> => {
  if (after === undefined) return []
  const [found] =
    await sql`select 1 from ${sql(TABLES[entity].records)} where account_id = ${accountId}
      and service_id = ${after}`
  return found
    ? []
    : [{ path: '/after', message: `No ${entity} of this account has service_id ${after}.` }]
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
export const pageBody = (
  rows: Buffer[][],
  limit: number,
  count?: Total,
  next?: (cursor: string) => string,
) => {
  const results = rows.slice(0, limit)
  const last = results[results.length - 1]
  const after = () => (next ? JSON.stringify(next(last[2].toString('utf8'))) : last[1])
  const paging = rows.length > limit ? `,"paging":{"next":{"after":${after()}}}` : ''
  const total = count
    ? `,"total":${count.total}${count.estimate ? ',"total_is_estimate":true' : ''}`
    : ''
  const objects = results.flatMap(([json], i) => (i === 0 ? [json] : [COMMA, json]))
  return Buffer.concat([OPEN, ...objects, Buffer.from(`]${paging}${total}}`)])
}

// Counted in a statement of its own, after the page's: a count reads every match, a page no more
// than it shows. Each has the search's budget (db/budget.ts).
const countOf = async (
  tx: Tx,
  track: Track,
  search: CheckedSearch,
  count: 'exact' | 'estimate',
): Promise<Total> => {
  const query = compileCount(search, count === 'estimate')
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
    key = sql`select value from service_secrets where name = 'search_cursor'`.then(
      ([row]) => row.value as Buffer,
    )
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

// A page of the search, as the bytes of the answer, under the search budget (db/budget.ts): reads
// alone, so that on Citus its statements are router queries without a transaction on the worker.
export const searchPage = (
  app: App,
  accountId: number,
  entity: Entity,
  body: SearchBody,
  caller?: Caller,
) =>
  budgeted(
    app,
    caller,
    'search',
    async (tx, track) => {
      const sorted = body.sort !== undefined && body.sort.length > 0
      const [context, key] = await Promise.all([
        searchContext(tx, accountId, entity, body),
        sorted ? cursorKey(app.sql) : undefined,
      ])
      const input = searchInput(accountId, entity, body, context, key)
      // Whether `after` names a record is asked only of a request refused anyway, or
      // of an empty page.
      const { problems, search } = checkSearch(input)
      if (problems) {
        return refuse(400, INVALID_SEARCH, [
          ...(await afterError(tx, accountId, entity, input.afterServiceId)),
          ...problems,
        ])
      }
      const query = compileSearch(search)
      const rows: Buffer[][] = await track(tx.unsafe(query.text, query.params as string[]).raw())
      const total = body.count && (await countOf(tx, track, search, body.count))
      if (rows.length === 0) {
        const errors = await afterError(tx, accountId, entity, input.afterServiceId)
        if (errors.length > 0) refuse(400, INVALID_SEARCH, errors)
      }
      return pageBody(rows, body.limit, total || undefined, query.next)
    },
    '',
    READS_ALONE,
  )
