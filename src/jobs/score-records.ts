import type { Task } from 'graphile-worker'
import { scoringInputs } from '../admin/scoring.ts'
import { propertyLookup, type CatalogDef, type Entity, type ScoringModel } from '../scoring/model.ts'
import { churnRiskSql, upsellScoreSql, weightedScoreSql, type SqlRefs } from '../scoring/sql.ts'
import type { Sql } from '../db/client.ts'
import { lockRecordsIn } from '../db/locks.ts'
import type { App } from '../http/types.ts'

// SPEC section 6 in bulk: scores of the given records (all of the account's when ids is absent),
// batch by batch, each batch two statements in one transaction. Both write only rows whose
// values change, so a rescoring that changes nothing writes nothing.
export interface ScoreRecordsPayload { account_id: number; entity: Entity; ids?: number[]; upload_id?: number }

export interface ScoreOptions {
  /** The UTC date scores are relative to (trend window, fit date properties, days since last_seen). */
  today?: string
  /** false: keep the snapshots' engagement (the daily run: it depends only on the snapshot date). */
  snapshots?: boolean
}

// Records per statement: keeps each statement's sort and the job's memory small whatever the account's size.
export const BATCH = 5000
// Batches scored at once: scoring is CPU-bound in PostgreSQL, one core per backend, so a whole
// account's rescoring uses two. Batches hold disjoint records, so they never wait on each other.
const PARALLEL = 2
const TREND_DAYS = 365
const TREND_RECORDS = 15

const tables = {
  customer: { records: 'customers', snapshots: 'customer_snapshots', fk: 'customer_id' },
  contact: { records: 'contacts', snapshots: 'contact_snapshots', fk: 'contact_id' },
} as const

export const utcToday = () => new Date().toISOString().slice(0, 10)

const refs = (isMetric: (codename: string) => boolean, metrics: string, date: string): SqlRefs => ({
  metric: (key) => `${metrics} -> ${key}`, attribute: (key) => `r.attributes -> ${key}`, date, isMetric,
})

// Engagement of every snapshot of the batch's records ($1 account, $2 ids): metric values from the
// snapshot, attributes from the record as it is now, date properties relative to the snapshot date.
const snapshotStatement = (entity: Entity, model: ScoringModel | null, defs: CatalogDef[]) => {
  const { records, snapshots, fk } = tables[entity]
  const { typeOf, isMetric } = propertyLookup(defs)
  const rules = (entity === 'customer' ? model?.customer?.engagement : model?.contact?.engagement) ?? []
  const engagement = weightedScoreSql(rules, typeOf, refs(isMetric, 's."values"', 's.date'), 3, 'e')
  const text = `
    update ${snapshots} t set engagement = x.engagement
    from (
      select s.${fk} as record_id, s.date, s.engagement as old, ${engagement.score} as engagement
      from ${snapshots} s join ${records} r on r.account_id = s.account_id and r.service_id = s.${fk}
        ${engagement.join}
      where s.account_id = $1::bigint and s.${fk} = any($2::bigint[]) and r.account_id = $1::bigint and r.service_id = any($2::bigint[])
    ) x
    where t.account_id = $1::bigint and t.${fk} = x.record_id and t.date = x.date and x.engagement is distinct from x.old`
  return { text, params: engagement.params }
}

// The record's summary of its scored snapshots, as summarizeHistory computes it ($3 today): the
// latest score, its difference to the one before, and the trend, the latest 15 dated within the
// 365 days up to today (n - ahead ranks a snapshot among those not dated after today). Customers
// also get fit (current attributes and latest metric values, date properties relative to today),
// churn risk and upsell, and an automatic churn is lifted once last_seen is no longer older than
// inactive_days ($4, 0 when unset) before the churn date: a snapshot dated on or after the churn
// date always lifts it. A manual churn is never touched.
const recordStatement = (entity: Entity, model: ScoringModel | null, defs: CatalogDef[]) => {
  const { records, snapshots, fk } = tables[entity]
  const { typeOf, isMetric } = propertyLookup(defs)
  const customer = entity === 'customer'
  const fit = weightedScoreSql(customer ? model?.customer?.fit ?? [] : [], typeOf, refs(isMetric, 'r.metrics', '$3::date'), 5, 'f')
  const derived = customer
    ? `, ${fit.score} as fit, coalesce(r.churn_reason = 'inactive' and h.last_seen >= r.churned_date - $4::integer, false) as lift`
    : ''
  const scores = customer
    ? `, ${churnRiskSql('d.score', 'd.fit', 'd.difference', '($3::date - d.last_seen)')} as churn_risk`
      + `, ${upsellScoreSql('d.score', 'd.fit', 'd.difference')} as upsell_score`
    : ''
  const columns = [
    ['last_seen', 'last_seen'], ['engagementscore', 'score'], ['engagementscore_difference', 'difference'],
    ['engagementscore_trend', 'trend'],
    ...customer ? [['fitscore', 'fit'], ['churn_risk', 'churn_risk'], ['upsell_score', 'upsell_score']] : [],
  ]
  const lift = customer
    ? `, is_churned = c.is_churned and not x.lift, churned_date = case when x.lift then null else c.churned_date end,`
      + ` churn_reason = case when x.lift then null else c.churn_reason end`
    : ''
  const text = `
    with scored as (
      select s.${fk} as record_id, s.date, s.engagement,
        row_number() over (partition by s.${fk} order by s.date desc) as n,
        count(*) filter (where s.date > $3::date) over (partition by s.${fk}) as ahead
      from ${snapshots} s
      where s.account_id = $1::bigint and s.${fk} = any($2::bigint[]) and s.engagement is not null
    ), history as (
      select record_id, max(date) as last_seen,
        max(engagement) filter (where n = 1) as score,
        max(engagement) filter (where n = 1) - max(engagement) filter (where n = 2) as difference,
        jsonb_object_agg(to_char(date, 'YYYY-MM-DD'), engagement)
          filter (where date <= $3::date and date > $3::date - ${TREND_DAYS} and n - ahead <= ${TREND_RECORDS}) as trend
      from scored group by record_id
    ), derived as (
      select r.service_id, h.last_seen, h.score, h.difference, h.trend${derived}
      from ${records} r left join history h on h.record_id = r.service_id ${fit.join}
      where r.account_id = $1::bigint and r.service_id = any($2::bigint[])
    ), x as (
      select d.*${scores} from derived d
    )
    update ${records} c set ${columns.map(([column, value]) => `${column} = x.${value}`).join(', ')}${lift}
    from x
    where c.account_id = $1::bigint and c.service_id = any($2::bigint[]) and c.service_id = x.service_id
      and ((${columns.map(([column]) => `c.${column}`).join(', ')}) is distinct from (${columns.map(([, value]) => `x.${value}`).join(', ')})${customer ? ' or x.lift' : ''})`
  return { text, params: customer ? [model?.churn?.inactive_days ?? 0, ...fit.params] : [] }
}

// Batches of record ids in id order: the given ones, or keyset pages over the whole account.
async function* batches(sql: Sql, accountId: number, entity: Entity, ids?: number[]): AsyncGenerator<number[]> {
  if (ids) {
    const sorted = [...new Set(ids)].sort((a, b) => a - b)
    for (let i = 0; i < sorted.length; i += BATCH) yield sorted.slice(i, i + BATCH)
    return
  }
  for (let after = 0; ;) {
    const rows = await sql`
      select service_id from ${sql(tables[entity].records)}
      where account_id = ${accountId} and service_id > ${after} order by service_id limit ${BATCH}`
    if (rows.length === 0) return
    yield rows.map((r) => r.service_id as number)
    after = rows[rows.length - 1].service_id
  }
}

export const scoreRecords = async (sql: Sql, p: ScoreRecordsPayload, options: ScoreOptions = {}) => {
  const today = options.today ?? utcToday()
  const { model, defs } = await scoringInputs(sql, p.account_id, p.entity)
  const snapshots = options.snapshots === false ? null : snapshotStatement(p.entity, model, defs)
  const records = recordStatement(p.entity, model, defs)
  let scored = 0
  const queue = batches(sql, p.account_id, p.entity, p.ids)
  const scoreBatches = async () => {
    for (let next = await queue.next(); !next.done; next = await queue.next()) {
      const fixed = [p.account_id, next.value]
      await sql.begin(async (tx) => {
        await lockRecordsIn(tx, tables[p.entity].records, p.account_id, tx`select unnest(${next.value}::bigint[])`)
        if (snapshots) await tx.unsafe(snapshots.text, [...fixed, ...snapshots.params] as never[])
        await tx.unsafe(records.text, [...fixed, today, ...records.params] as never[])
      })
      scored += next.value.length
    }
  }
  await Promise.all(Array.from({ length: PARALLEL }, scoreBatches))
  if (p.upload_id !== undefined) {
    await sql`update uploads set scored_at = now() where account_id = ${p.account_id} and id = ${p.upload_id}`
  }
  return scored
}

export const scoreRecordsTask = (app: App): Task => async (payload) => {
  await scoreRecords(app.sql, payload as ScoreRecordsPayload)
}
