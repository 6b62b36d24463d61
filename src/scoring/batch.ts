import { getScoreAlerts, scoringInputs } from './store.ts'
import { churnProbabilitiesOf } from '../churn/train.ts'
import type { Entity, PropertyDef } from '../property.ts'
import type { App } from '../context.ts'
import { refreshStatistics } from '../db/analyze.ts'
import type { Sql, Tx } from '../db/client.ts'
import { PLANNER, setLocal } from '../db/planner.ts'
import {
  addCustomersChanged,
  type ScoreRecordsPayload,
  type ScoreUploadsPayload,
} from '../db/jobs.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'
import { TABLES } from '../db/tables.ts'
import { today as utcToday } from '../dates.ts'
import type { Log } from '../log.ts'
import type { EventItem } from '../webhooks/events.ts'
import { enqueueEvent } from '../webhooks/outbox.ts'
import { watchScores } from './changes.ts'
import { recordChurnEvents, writeProbabilities } from './churn.ts'
import { propertyLookup, type ScoringModel } from './rules/model.ts'
import { churnRiskSql, type SqlRefs, upsellScoreSql, weightedScoreSql } from './rules/sql.ts'

// docs/scoring.md in bulk: scores of the given records (all of the account's when ids is absent),
// batch by batch, each batch one statement that writes the score rows (customer_scores,
// contact_scores) whose values change, so a rescoring that changes nothing writes nothing.
export interface ScoreOptions {
  /**
   * The UTC date scores are relative to (trend window, fit date properties, days since
   * last_seen).
   */
  today?: string
  /**
   * false: keep the stored engagement history (the daily run: a snapshot's score depends only on
   * its own date).
   */
  snapshots?: boolean
  /** Where a batch that met a stored number no double can hold is reported. */
  log?: Log
}

// Records per statement: keeps each statement's sort and the job's memory small whatever
// the account's size.
export const SCORING_BATCH = 5000
// Batches scored at once: scoring is CPU-bound in PostgreSQL, one core per backend, and a third
// batch computes while the others write and commit (docs/benchmarks.md, "Figures behind code
// choices"). Batches hold disjoint records, so they never wait on each other.
export const PARALLEL = 3
const TREND_DAYS = 365
const TREND_RECORDS = 15
// Dated within the trend window: the 365 days up to today ($3).
const RECENT = (date: string) => `${date} <= $3::date and ${date} > $3::date - ${TREND_DAYS}`

// Where the scoring levels read from: `row` names the level of a score's `values`; both levels of
// jsonb values are named `raw`.
const refs = (
  isMetric: (codename: string) => boolean,
  metrics: string,
  row: string,
  date: string,
): SqlRefs => ({
  metric: (key) => `${metrics} -> ${key}`,
  attribute: (key) => `r.attributes -> ${key}`,
  raw: (name) => `raw.${name}`,
  value: (name) => `${row}.${name}`,
  column: (name) => `rec.${name}`,
  date,
  isMetric,
})
const list = (items: string[]) => items.map((item) => `, ${item}`).join('')
// json has no equality operator; the trend's text is compared, which json_object_agg writes the
// same way for the same scores because it aggregates in date order (in the order the plan read
// the snapshots, a batch and the whole account wrote the same trend in two texts: a Citus run).
const compared = (sql: string, column: string) =>
  column === 'engagementscore_trend' ? `${sql}::text` : sql

// Scores of a batch of records ($1 account, $2 ids, $3 today): each snapshot's engagement (or with
// `snapshots` false the stored history), then what summarizeHistory computes from them;
// customers also get fit, churn risk and upsell. The trend is json, not jsonb: jsonb_object_agg
// costs twice as much. Score rows are written only where a value changes, looked for among
// the batch's records only; a concurrent insert of the same row (a second job scoring the same
// records) wins: same scores.
const scoreStatement = (
  entity: Entity,
  model: ScoringModel | null,
  defs: PropertyDef[],
  snapshots: boolean,
  tolerant: boolean,
) => {
  const t = TABLES[entity]
  const { typeOf, isMetric } = propertyLookup(defs)
  const customer = entity === 'customer'
  const rules = (customer ? model?.customer?.engagement : model?.contact?.engagement) ?? []
  const engagement = weightedScoreSql(
    snapshots ? rules : [],
    typeOf,
    refs(isMetric, 's."values"', 'sv', 'sv.date'),
    4,
    'e',
    tolerant,
  )
  const fit = weightedScoreSql(
    customer ? (model?.customer?.fit ?? []) : [],
    typeOf,
    refs(isMetric, 'r.metrics', 'rec', '$3::date'),
    4 + engagement.params.length,
    'f',
    tolerant,
  )
  const scored = snapshots
    ? `select x.record_id, x.date, ${engagement.score} as score from (
        select sv.record_id, sv.date${list(engagement.sums)} from (
          select raw.record_id, raw.date${list(engagement.values.typed)} from (
            select s.${t.fk} as record_id, s.date${list(engagement.values.raw)} from ${t.snapshots} s
            where s.account_id = $1::bigint and s.${t.fk} = any($2::bigint[]) offset 0
          ) raw offset 0
        ) sv join rec on rec.service_id = sv.record_id offset 0
      ) x where ${engagement.scored}`
    : `select h.${t.fk} as record_id, x.date, x.score
      from ${t.scores} h cross join lateral unnest(h.history_dates, h.history_scores) as x(date, score)
      where h.account_id = $1::bigint and h.${t.fk} = any($2::bigint[])`
  const fitColumns = customer
    ? [
        ['fitscore', 'fit'],
        ['churn_risk', 'churn_risk'],
        ['upsell_score', 'upsell_score'],
      ]
    : []
  const columns = [
    ['history_dates', 'dates'],
    ['history_scores', 'scores'],
    ['last_seen', 'last_seen'],
    ['engagementscore', 'score'],
    ['engagementscore_difference', 'difference'],
    ['engagementscore_trend', 'trend'],
    ...fitColumns,
  ]
  const derived = customer
    ? `, ${churnRiskSql('d.score', 'd.fit', 'd.difference', '($3::date - d.last_seen)')} as churn_risk` +
      `, ${upsellScoreSql('d.score', 'd.fit', 'd.difference')} as upsell_score`
    : ''
  const typed = [...engagement.columns.typed, ...fit.columns.typed, ...fit.values.typed]
  const text = `
    with rec as materialized (
      select raw.service_id, raw.external_id${list(typed)} from (
        select r.service_id, r.external_id${list([...engagement.columns.raw, ...fit.columns.raw, ...fit.values.raw])}
        from ${t.records} r where r.account_id = $1::bigint and r.service_id = any($2::bigint[]) offset 0
      ) raw
    ), scored as (
      ${scored}
    ), history as (
      select record_id, array_agg(date order by date) as dates, array_agg(score order by date) as scores,
        count(*) filter (where ${RECENT('date')}) as recent,
        json_object_agg(date, score order by date) filter (where ${RECENT('date')}) as trend
      from scored group by record_id
    ), d as (
      select fr.service_id, fr.external_id, coalesce(h.dates, '{}') as dates, coalesce(h.scores, '{}') as scores,
        h.dates[cardinality(h.dates)] as last_seen, h.scores[cardinality(h.scores)] as score,
        h.scores[cardinality(h.scores)] - h.scores[cardinality(h.scores) - 1] as difference,
        case when h.recent <= ${TREND_RECORDS} then h.trend else (
          select json_object_agg(t.date, t.score order by t.date) from (
            select u.date, u.score from unnest(h.dates, h.scores) as u(date, score) where ${RECENT('u.date')}
              order by u.date desc limit ${TREND_RECORDS}
          ) t
        ) end as trend,
        ${customer ? fit.score : 'null::integer'} as fit
      from (select rec.service_id, rec.external_id${list(fit.sums)} from rec offset 0) fr left join history h
        on h.record_id = fr.service_id
    ), x as (
      select d.*${derived} from d
    ), updated as (
      update ${t.scores} c set ${columns.map(([column, value]) => `${column} = x.${value}`).join(', ')}
      from x
      where c.account_id = $1::bigint and c.${t.fk} = any($2::bigint[]) and c.${t.fk} = x.service_id
        and (${columns.map(([column]) => compared(`c.${column}`, column)).join(', ')})
          is distinct from (${columns.map(([column, value]) => compared(`x.${value}`, column)).join(', ')})
    )
    insert into ${t.scores} (account_id, ${t.fk}, external_id, ${columns.map(([column]) => column).join(', ')})
    select $1::bigint, x.service_id, x.external_id, ${columns.map(([, value]) => `x.${value}`).join(', ')} from x
    where (x.last_seen is not null or x.fit is not null)
      and not exists (
        select 1 from ${t.scores} c
        where c.account_id = $1::bigint and c.${t.fk} = any($2::bigint[]) and c.${t.fk} = x.service_id
      )
    on conflict do nothing`
  return { text, params: [...engagement.params, ...fit.params] }
}

// An automatic churn is lifted once last_seen is no longer older than inactive_days (0 when
// unset) before the churn date: a snapshot dated on or after the churn date always lifts it. A
// manual churn is never touched. The few rows lifted are locked in service_id order first, as
// every writer of records does (src/db/locks.ts). The date is formatted in the CTE: Citus allows no
// non-immutable function (to_char) in a RETURNING clause.
const liftInactive = (tx: Tx, accountId: number, ids: number[], inactiveDays: number) => tx<
  EventItem<'customer.reactivated'>[]
>`
  with lifted as (
    select c.service_id, to_char(c.churned_date, 'YYYY-MM-DD') as churned_date
    from customers c join customer_scores h on h.account_id = c.account_id
      and h.customer_id = c.service_id
    where c.account_id = ${accountId} and c.service_id = any(${ids}::bigint[])
      and c.churn_reason = 'inactive'
      and h.last_seen >= c.churned_date - ${inactiveDays}::integer
    order by c.service_id for no key update of c
  )
  update customers c set is_churned = false, churned_date = null, churn_reason = null
  from lifted l where c.account_id = ${accountId} and c.service_id = l.service_id
  returning c.service_id, c.external_id, c.name, l.churned_date, 'activity' as reason`

// Batches of record ids in id order: the given ones, or keyset pages over the whole account.
async function* batches(
  sql: Sql,
  accountId: number,
  entity: Entity,
  ids?: number[],
): AsyncGenerator<number[]> {
  if (ids) {
    const sorted = [...new Set(ids)].sort((a, b) => a - b)
    for (let i = 0; i < sorted.length; i += SCORING_BATCH) yield sorted.slice(i, i + SCORING_BATCH)
    return
  }
  for (let after = 0; ; ) {
    const rows = await sql<{ service_id: number }[]>`
      select service_id from ${sql(TABLES[entity].records)}
      where account_id = ${accountId} and service_id > ${after} order by service_id
        limit ${SCORING_BATCH}`
    if (rows.length === 0) return
    yield rows.map((r) => r.service_id)
    after = rows[rows.length - 1].service_id
  }
}

export const scoreRecords = async (
  sql: Sql,
  p: ScoreRecordsPayload,
  options: ScoreOptions = {},
) => {
  const today = options.today ?? utcToday()
  const { model, defs } = await scoringInputs(sql, p.account_id, p.entity)
  const statement = (tolerant: boolean) =>
    scoreStatement(p.entity, model, defs, options.snapshots !== false, tolerant)
  const plain = statement(false)
  let tolerant: typeof plain | undefined
  const inactiveDays = model?.churn?.inactive_days ?? 0
  const alerts = p.entity === 'customer' ? await getScoreAlerts(sql, p.account_id) : {}
  let scored = 0
  let logged = false
  const queue = batches(sql, p.account_id, p.entity, p.ids)
  const scoreIn = (ids: number[], statement: typeof plain) =>
    sql.begin(async (tx) => {
      await setLocal(tx, PLANNER.scoringBatch)
      const compare =
        Object.keys(alerts).length > 0 &&
        (await watchScores(tx, p.account_id, ids, { alerts, model, defs, today }))
      await tx.unsafe(statement.text, [p.account_id, ids, today, ...statement.params])
      // The learned churn probability, by the account's ready model (none: nothing written), inside
      // the watch so that its change is announced like the rule scores'.
      if (p.entity === 'customer') {
        const churn = await churnProbabilitiesOf(tx, p.account_id, ids, today)
        if (churn) await writeProbabilities(tx, p.account_id, churn.ids, churn.probabilities, today)
      }
      if (compare) await compare()
      if (p.entity === 'customer') {
        const reactivated = await liftInactive(tx, p.account_id, ids, inactiveDays)
        await enqueueEvent(tx, p.account_id, 'customer.reactivated', reactivated)
        const lifted = reactivated.map((c) => ({
          service_id: c.service_id,
          churned: false,
          reason: 'inactive',
        }))
        await recordChurnEvents(tx, p.account_id, lifted)
        await addCustomersChanged(tx, p.account_id)
      }
    })
  // A number stored before the one value rule (values.ts) that no double can hold makes the plain
  // statement raise; the batch is then scored again reading it as no value, so that one value can
  // never fail a job. Reported once per run, naming the first batch it was met in.
  const scoreBatch = async (ids: number[]) => {
    try {
      await scoreIn(ids, plain)
    } catch (err) {
      if (sqlState(err) !== SQLSTATE.NUMERIC_VALUE_OUT_OF_RANGE) throw err
      if (!logged)
        options.log?.('warn', 'a stored number no double can hold was scored as no value', {
          account_id: p.account_id,
          entity: p.entity,
          first_id: ids[0],
          last_id: ids[ids.length - 1],
        })
      logged = true
      tolerant ??= statement(true)
      await scoreIn(ids, tolerant)
    }
  }
  const scoreBatches = async () => {
    for (let next = await queue.next(); !next.done; next = await queue.next()) {
      await scoreBatch(next.value)
      scored += next.value.length
    }
  }
  await Promise.all(Array.from({ length: PARALLEL }, scoreBatches))
  await refreshStatistics(sql, p.account_id, p.entity)
  return scored
}

// Uploads whose records are scored: what they wrote is no longer kept.
const markScored = (sql: Sql, accountId: number, uploadIds: number[]) => sql`
  update uploads set scored_at = now(), record_ids = null
  where account_id = ${accountId} and id = any(${uploadIds}::bigint[])`

// The score_records task, which runs the jobs db/jobs.ts scoreRecordsJobs specifies; answers
// counts for the job's log.
export const scoreRecordsTask = async (app: App, payload: ScoreRecordsPayload) => {
  const scored = await scoreRecords(app.sql, payload, {
    snapshots: payload.snapshots,
    log: app.log,
  })
  if (payload.upload_id !== undefined)
    await markScored(app.sql, payload.account_id, [payload.upload_id])
  return { entity: payload.entity, scored }
}

// The records the uploads wrote (kept since they were processed), scored together: a record two of
// them wrote is listed twice, and scoreRecords scores it once.
const recordsOf = async (sql: Sql, accountId: number, uploadIds: number[]) =>
  (
    await sql<{ ids: number[] }[]>`
      select coalesce(array_agg(r.id), '{}') as ids
      from uploads u cross join unnest(u.record_ids) as r(id)
      where u.account_id = ${accountId} and u.id = any(${uploadIds}::bigint[])`
  )[0].ids

// The score_uploads task (db/jobs.ts scoreUploadsJob): a batch of processed uploads of one account
// and entity, their records scored in one run, then the uploads marked scored.
export const scoreUploadsTask = async (app: App, payload: ScoreUploadsPayload) => {
  if (payload.length === 0) return { uploads: 0 }
  const [{ account_id: accountId, entity }] = payload
  const uploadIds = payload.map((item) => item.upload_id)
  const ids = await recordsOf(app.sql, accountId, uploadIds)
  const scored = await scoreRecords(
    app.sql,
    { account_id: accountId, entity, ids },
    { log: app.log },
  )
  await markScored(app.sql, accountId, uploadIds)
  return { entity, uploads: uploadIds.length, scored }
}
