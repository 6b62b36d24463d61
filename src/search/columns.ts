// The columns of a page: each record as the interface's Customer or Contact shows it, and the
// joins they read (its scores, a contact's customer).
import { TABLES } from '../db/tables.ts'
import { PAST_FIELDS } from './fields.ts'
import { bindList, coreSql, type Ctx, tagLinksSql } from './predicates.ts'

function isoTimestamp(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

// The custom values shown (all without `properties`), and the past engagement fields it names,
// which a custom property cannot shadow there (they are computed, like the search fields they are).
export function propertiesSql(selected: readonly string[] | undefined, ctx: Ctx): string {
  if (!selected) return 'r.attributes || r.metrics'
  const past = PAST_FIELDS.filter((f) => selected.includes(f))
  const custom = [...new Set(selected)].filter((p) => !past.includes(p))
  const keys = custom.length ? bindList(ctx, custom, 'text') : undefined
  const values = keys
    ? `(select coalesce(jsonb_object_agg(p.key, p.value), '{}'::jsonb) from jsonb_each(r.attributes || r.metrics) p ` +
      `where p.key = any(${keys}))`
    : `'{}'::jsonb`
  if (!past.length) return values
  return `(${values} || jsonb_build_object(${past.map((f) => `'${f}', ${coreSql(f, ctx)}`).join(', ')}))`
}

export function columnsSql(ctx: Ctx, properties: string): string[] {
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
      'h.churn_probability',
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

export function afterSql(ctx: Ctx, serviceId: string): string {
  const table = TABLES[ctx.entity].records
  return `select a.external_id from ${table} a where a.account_id = ${ctx.account} and a.service_id = ${serviceId}`
}

// A record's scores (`h`, sql/009_scores.sql; a record not yet scored has none) and a contact's
// customer (`oc`), each joined to the page's records `r`.
export function joinsSql(ctx: Ctx): { scores: string; customer: string } {
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
