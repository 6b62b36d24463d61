// Search compiler: a filter list or tree plus the account's property catalog become one
// parameterised query for postgres.js `sql.unsafe(text, params)`: the criteria (criteria.ts) as
// conditions (predicates.ts), and the page of records around them, or their count. Every
// user-supplied string (codenames, values, ids) travels as a bound parameter with an explicit cast.
import { TABLES } from '../db/tables.ts'
import { checkProperties, collectTree, type Lookups } from './criteria.ts'
import {
  type Conditions,
  type Criterion,
  type Entity,
  type ErrorDetail,
  type Field,
  isNode,
  leavesOf,
  MAX_LIMIT,
  type PropertyDef,
  SearchError,
  type Tree,
} from './fields.ts'
import { CORE_SQL, type Ctx, type SqlType, tagLinksSql, treeSql } from './predicates.ts'

function isoTimestamp(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

function propertiesSql(selected: readonly string[] | undefined, ctx: Ctx): string {
  if (!selected) return 'r.attributes || r.metrics'
  if (selected.length === 0) return `'{}'::jsonb`
  const keys = [...new Set(selected)].map((k) => ctx.bind(k, 'text')).join(', ')
  return (
    `(select coalesce(jsonb_object_agg(p.key, p.value), '{}'::jsonb) from jsonb_each(r.attributes || r.metrics) p ` +
    `where p.key in (${keys}))`
  )
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
      'h.upsell_score',
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
  const table = TABLES[ctx.entity].records
  return `select a.external_id from ${table} a where a.account_id = ${ctx.account} and a.service_id = ${serviceId}`
}

// A record's scores (`h`, sql/009_scores.sql; a record not yet scored has none) and a contact's
// customer (`oc`), each joined to the page's records `r`.
function joinsSql(ctx: Ctx): { scores: string; customer: string } {
  return {
    scores:
      `left join ${TABLES[ctx.entity].scores} h on h.account_id = ${ctx.account} ` +
      `and h.${TABLES[ctx.entity].fk} = r.service_id`,
    customer:
      ctx.entity === 'customer'
        ? ''
        : `left join customers oc on oc.account_id = ${ctx.account} and oc.service_id = r.customer_id`,
  }
}

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
  // such record the page is empty, and the caller tells why.
  afterServiceId?: number
  // One record by external ID (the single-record read endpoints).
  externalId?: string
  // Each record as one JSON text rendered by Postgres (column `json`, beside `service_id`), so that
  // a page goes out without being parsed and serialized again.
  json?: boolean
}

export interface CompiledSearch {
  text: string
  params: unknown[]
}

// The input's condition, validated (or a SearchError with every problem of the input, after the
// caller's own `errors`), and a context that binds the parameters of one statement.
function begin(
  input: MatchInput & { limit?: number; properties?: readonly string[] },
  errors: ErrorDetail[] = [],
): { tree: Tree<Criterion>; ctx: Ctx; params: string[] } {
  const { limit } = input
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)) {
    errors.push({ path: '/limit', message: `must be an integer from 1 to ${MAX_LIMIT}` })
  }
  const tree = collectTree(input.entity, input, input.catalog, errors)
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
  return { tree, ctx, params }
}

// Top-level ANDs as separate conditions, so that the interface's filters compile one condition each.
const conjuncts = (t: Tree<Criterion>): Tree<Criterion>[] => (isNode(t) && 'and' in t ? t.and.flatMap(conjuncts) : [t])

// The account's records `r` that the condition matches: the table with the joins the condition
// (and the statement's own `fields`) read, and the conditions, to be ANDed.
function matchSql(ctx: Ctx, tree: Tree<Criterion>, fields: readonly Field[] = []): { from: string; where: string[] } {
  const joins = joinsSql(ctx)
  const read = [...leavesOf(tree).map((c) => c.field), ...fields]
  const reads = (alias: string) =>
    read.some((f) => f.source === 'core' && CORE_SQL.get(f.name)?.startsWith(`${alias}.`))
  const from = [`${TABLES[ctx.entity].records} r`, reads('h') ? joins.scores : '', reads('oc') ? joins.customer : '']
  return {
    from: from.filter(Boolean).join(' '),
    where: [`r.account_id = ${ctx.account}`, ...conjuncts(tree).map((c) => treeSql(c, ctx))],
  }
}

// One page of records ordered by external ID; it asks for limit + 1 rows so the caller can tell
// whether a next page exists.
export function compileSearch(input: SearchInput): CompiledSearch {
  const { tree, ctx, params } = begin(input)
  const columns = columnsSql(ctx, propertiesSql(input.properties, ctx))
  const match = matchSql(ctx, tree)
  const where = [
    ...match.where,
    ...(input.afterServiceId === undefined
      ? []
      : [`r.external_id > (${afterSql(ctx, ctx.bind(String(input.afterServiceId), 'bigint'))})`]),
    ...(input.externalId === undefined ? [] : [`r.external_id = ${ctx.bind(input.externalId, 'text')}`]),
  ]
  // The page is cut first, joining only what its conditions read; the columns' joins come after, so
  // that the matches of a broad filter are not all joined before the sort and the limit.
  const joins = joinsSql(ctx)
  const page = [
    `select ${columns.join(',\n  ')}`,
    `from (select r.* from ${match.from}`,
    `where ${where.join('\n  and ')}`,
    'order by r.external_id',
    `limit ${ctx.bind(String(input.limit + 1), 'integer')}`,
    `) r ${[joins.scores, joins.customer].filter(Boolean).join(' ')}`,
    'order by r.external_id',
  ].join('\n')
  const text = input.json
    ? `select row_to_json(p)::text as json, p.service_id from (\n${page}\n) p order by p.id`
    : page
  return { text, params }
}

// All the records the search matches, paging aside: their number (column `total`), or the
// planner's estimate of it, EXPLAIN's rows of the matching records (`estimate`), planned, never run.
export function compileCount(input: SearchInput, estimate: boolean): CompiledSearch {
  const { tree, ctx, params } = begin(input)
  const { from, where } = matchSql(ctx, tree)
  const match = `from ${from}\nwhere ${where.join('\n  and ')}`
  return { text: estimate ? `explain (format json) select 1 ${match}` : `select count(*) as total ${match}`, params }
}

// The records the search matches, paging aside (columns service_id and external_id): the set a
// saved segment holds.
export function compileMembers(input: MatchInput): CompiledSearch {
  const { tree, ctx, params } = begin(input)
  const { from, where } = matchSql(ctx, tree)
  return { text: `select r.service_id, r.external_id from ${from}\nwhere ${where.join('\n  and ')}`, params }
}

// The matching records for a statement built elsewhere (src/search/aggregate.ts): FROM, joining
// what the condition and `fields` read, WHERE, and the context to bind the statement's own
// parameters with. `errors` are the caller's problems, reported in one SearchError with the
// condition's.
export function compileMatch(input: MatchInput, fields: readonly Field[], errors: ErrorDetail[]) {
  const { tree, ctx, params } = begin(input, errors)
  return { ...matchSql(ctx, tree, fields), ctx, params }
}
