import * as v from 'valibot'
import { strict } from '../validate.ts'
import { catalogSql } from '../admin/properties.ts'
import type { Entity, PropertyDef } from '../catalog.ts'
import type { App } from '../context.ts'
import type { Sql } from '../db/client.ts'
import { TABLES } from '../db/tables.ts'
import { today } from '../dates.ts'
import { refuse } from '../errors.ts'
import { contextNeeds } from '../search/criteria.ts'
import { type ErrorDetail, MAX_FILTERS, MAX_LIMIT, SearchError } from '../search/fields.ts'
import { compileSearch } from '../search/sql.ts'

// Each IN value and selected codename becomes one bound parameter; the caps keep a 5 MB body from
// outgrowing Postgres' 65535 parameters.
export const MAX_LIST = 1000

const SearchFilter = strict({
  propertyName: v.string(),
  operator: v.string(),
  value: v.optional(v.string()),
  values: v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_LIST, `At most ${MAX_LIST} values.`))),
})

// Shapes and ranges here; codenames, operators and values against the account's catalog in the
// compiler, which reports them with the same kind of paths.
export const SearchBody = strict({
  filters: v.optional(v.pipe(v.array(SearchFilter), v.maxLength(MAX_FILTERS, `At most ${MAX_FILTERS} filters.`))),
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
  after: v.optional(v.pipe(v.number(), v.safeInteger('Must be the service_id of a record (paging.next.after).'))),
})
export type SearchBody = v.InferOutput<typeof SearchBody>

const NO_CONTEXT = { catalog: [] as PropertyDef[], lookups: { users: new Map(), tags: new Map() } }

// Everything the compiler needs from the database, in one round trip: the account's property
// catalog and the ids of the users and tags that owner and tags operands name. Nothing is cached
// between requests: other processes may change any of it. A request on core fields alone needs
// none of it and skips the round trip.
export const searchContext = async (sql: Sql, accountId: number, entity: Entity, body: SearchBody) => {
  const needs = contextNeeds(entity, body.filters ?? [], body.properties)
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
  sql: Sql,
  accountId: number,
  entity: Entity,
  after: number | undefined,
): Promise<ErrorDetail[]> => {
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
// The answer for a page of raw rows (bench/search's floor server sends the same bytes).
export const pageBody = (rows: [Buffer, Buffer][], limit: number) => {
  const results = rows.slice(0, limit)
  const paging = rows.length > limit ? `,"paging":{"next":{"after":${results[results.length - 1][1]}}}` : ''
  const objects = results.flatMap(([json], i) => (i === 0 ? [json] : [COMMA, json]))
  return Buffer.concat([OPEN, ...objects, Buffer.from(`]${paging}}`)])
}

// A page of the search, as the bytes of the answer.
export const searchPage = async (app: App, accountId: number, entity: Entity, body: SearchBody) => {
  const context = await searchContext(app.sql, accountId, entity, body)
  let query: ReturnType<typeof compileSearch>
  try {
    query = compileSearch({
      entity,
      accountId,
      catalog: context.catalog,
      lookups: context.lookups,
      filters: body.filters ?? [],
      properties: body.properties,
      limit: body.limit,
      afterServiceId: body.after,
      json: true,
      today: today(),
    })
  } catch (err) {
    if (!(err instanceof SearchError)) throw err
    return refuse(400, 'The search request is invalid.', [
      ...(await afterError(app.sql, accountId, entity, body.after)),
      ...err.errors,
    ])
  }
  const rows = (await app.sql.unsafe(query.text, query.params as string[]).raw()) as unknown as [Buffer, Buffer][]
  if (rows.length === 0) {
    const errors = await afterError(app.sql, accountId, entity, body.after)
    if (errors.length > 0) refuse(400, 'The search request is invalid.', errors)
  }
  return pageBody(rows, body.limit)
}
