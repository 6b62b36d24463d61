import * as v from 'valibot'
import { fail } from '../http/errors.ts'
import {
  compileSearch, lookupOperands, MAX_FILTERS, MAX_LIMIT, SearchError, type Entity, type ErrorDetail, type Filter, type PropertyDef,
} from '../search/compile.ts'
import type { Sql } from '../db/client.ts'
import type { Handler } from '../http/types.ts'

// Each IN value and selected codename becomes one bound parameter; the caps keep a 5 MB body from
// outgrowing Postgres' 65535 parameters.
export const MAX_LIST = 1000

const Filter = v.object({
  propertyName: v.string(),
  operator: v.string(),
  value: v.optional(v.string()),
  values: v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_LIST, `At most ${MAX_LIST} values.`))),
})

// Shapes and ranges here; codenames, operators and values against the account's catalog in the
// compiler, which reports them with the same kind of paths.
export const SearchBody = v.object({
  filters: v.optional(v.pipe(v.array(Filter), v.maxLength(MAX_FILTERS, `At most ${MAX_FILTERS} filters.`))),
  properties: v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_LIST, `At most ${MAX_LIST} codenames.`))),
  limit: v.optional(v.pipe(v.number(), v.integer('Must be an integer.'), v.minValue(1, 'At least 1.'), v.maxValue(MAX_LIMIT, `At most ${MAX_LIMIT}.`)), 100),
  after: v.optional(v.pipe(v.number(), v.safeInteger('Must be the service_id of a record (paging.next.after).'))),
})
type SearchBody = v.InferOutput<typeof SearchBody>

const TABLES = { customer: 'customers', contact: 'contacts' } as const

// Everything the compiler needs from the database, in one round trip: the account's property
// catalog, the external id behind `after`, and the ids of the users and tags that owner and tags
// operands name. Nothing is cached between requests: other processes may change any of it.
export const searchContext = async (sql: Sql, accountId: number, entity: Entity, body: SearchBody) => {
  const { emails, titles } = lookupOperands(entity, body.filters ?? [])
  const [row] = await sql`
    select
      coalesce((
        select json_agg(json_build_object('codename', codename, 'kind', kind, 'type', type))
        from property_defs where account_id = ${accountId} and entity = ${entity}
      ), '[]') as catalog,
      (select external_id from ${sql(TABLES[entity])} where account_id = ${accountId} and service_id = ${body.after ?? null}) as after,
      coalesce((
        select json_object_agg(w.v, u.id) from unnest(${emails}::text[]) w(v)
        join users u on u.account_id = ${accountId} and lower(u.email) = lower(w.v)
      ), '{}') as users,
      coalesce((
        select json_object_agg(w.v, t.id) from unnest(${titles}::text[]) w(v)
        join tags t on t.account_id = ${accountId} and lower(t.title) = lower(w.v)
      ), '{}') as tags`
  const ids = (o: Record<string, number>) => new Map(Object.entries(o))
  return {
    catalog: row.catalog as PropertyDef[],
    after: row.after as string | null,
    lookups: { users: ids(row.users), tags: ids(row.tags) },
  }
}

// One page: limit + 1 rows are read, the extra one only telling that a next page exists. The
// rows come out of the SQL already shaped as the interface's Customer and Contact objects.
const search = (entity: Entity): Handler => async (req, app) => {
  const body = req.input as SearchBody
  const accountId = req.auth!.accountId
  const context = await searchContext(app.sql, accountId, entity, body)
  const errors: ErrorDetail[] = []
  if (body.after !== undefined && context.after === null) {
    errors.push({ path: '/after', message: `No ${entity} of this account has service_id ${body.after}.` })
  }
  let query: ReturnType<typeof compileSearch> | undefined
  try {
    query = compileSearch({
      entity, accountId, catalog: context.catalog, filters: (body.filters ?? []) as Filter[], properties: body.properties,
      limit: body.limit, afterExternalId: context.after ?? undefined, lookups: context.lookups,
      today: new Date().toISOString().slice(0, 10),
    })
  } catch (err) {
    if (!(err instanceof SearchError)) throw err
    errors.push(...err.errors)
  }
  if (errors.length > 0 || !query) return fail(400, 'The search request is invalid.', errors)
  const rows = await app.sql.unsafe(query.text, query.params as string[])
  const results = rows.slice(0, body.limit)
  const more = rows.length > body.limit
  return { status: 200, body: { results, ...(more && { paging: { next: { after: results[results.length - 1].service_id } } }) } }
}

export const searchCustomers = search('customer')
export const searchContacts = search('contact')
