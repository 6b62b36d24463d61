import * as v from 'valibot'
import type { InferOutput } from 'valibot'
import type { Entity } from '../catalog.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addJobs, rescoreAccountJobs } from '../db/jobs.ts'
import { refuse } from '../errors.ts'
import type { ScoreAlerts } from '../scoring/alerts.ts'
import { strict } from '../validate.ts'
import { daysBetween, today as utcToday } from '../dates.ts'
import { checkModelAgainstProperties, propertyLookup, type ScoringModel, ScoringModelSchema } from '../scoring/model.ts'
import { churnRisk, summarizeHistory, upsellScore, weightedScore } from '../scoring/score.ts'
import { catalogSql, readCatalog } from '../catalog/properties.ts'

type Model = InferOutput<typeof ScoringModelSchema>

export const PreviewBody = strict({
  model: ScoringModelSchema,
  external_id: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
})

// The model is checked against the account's properties: a rule on an undefined codename, or of
// a form that does not fit the property's type, is refused with its path (below `at`, where the
// model sits in the request body). Resolves to the account's customer properties.
const checkModel = async (sql: Sql, accountId: number, model: Model, at = '') => {
  const catalogs = {
    customer: await readCatalog(sql, accountId, 'customer'),
    contact: await readCatalog(sql, accountId, 'contact'),
  }
  const problems = checkModelAgainstProperties(model, catalogs).map((p) => ({ ...p, path: at + p.path }))
  if (problems.length) refuse(400, "The scoring model does not fit the account's properties.", problems)
  return catalogs.customer
}

// The stored model, locked: a change made meanwhile by another request is compared with, not
// overlooked.
const lockModel = (tx: Tx, accountId: number) =>
  tx`select model from scoring_models where account_id = ${accountId} for update`

// Stores the model; answers the entities whose engagement rules are those of `old` (compared as
// jsonb, so key order aside; none without an old model).
const storeModel = (tx: Tx, accountId: number, model: Model, old: unknown) => tx`
  insert into scoring_models as m (account_id, model) values (${accountId}, ${tx.json(model as never)})
  on conflict (account_id) do update set model = excluded.model, updated_at = now()
  returning array(
    select e from unnest(array['customer', 'contact']) e
    where ${old === undefined ? null : tx.json(old as never)}::jsonb -> e -> 'engagement' = m.model -> e -> 'engagement'
  ) as unchanged`

// A checked model is stored together with the jobs that rescore the account under it. Where its
// engagement rules are those of the model before (a change to fit or churn), the snapshots' scores
// still hold: the rescoring keeps the stored histories, at the cost of the daily run.
export const putScoringModel = async (sql: Sql, accountId: number, model: Model) => {
  await checkModel(sql, accountId, model)
  await sql.begin(async (tx) => {
    const [old] = await lockModel(tx, accountId)
    const [{ unchanged }] = await storeModel(tx, accountId, model, old?.model)
    await addJobs(tx, rescoreAccountJobs(accountId, unchanged))
  })
  return model
}

export const getScoringModel = async (sql: Sql, accountId: number) => {
  const [row] = await sql`select model from scoring_models where account_id = ${accountId}`
  return row ? row.model : refuse(404, 'The account has no scoring model.')
}

// What scoring an entity of the account needs: its model (null without one) and property catalog.
export const scoringInputs = async (sql: Sql | Tx, accountId: number, entity: Entity) => {
  const [row] = await sql`
    select (select model from scoring_models where account_id = ${accountId}) as model,
      ${catalogSql(sql, accountId, entity)} as defs`
  return { model: row.model as ScoringModel | null, defs: row.defs }
}

// Setting alerts rescores the account's customers, which records each one's contributions: the
// "before" of the first change to announce. Clearing them ({}) forgets the contributions.
export const putScoreAlerts = (sql: Sql, accountId: number, alerts: ScoreAlerts) =>
  sql.begin(async (tx) => {
    const set = Object.keys(alerts).length > 0
    await tx`update accounts set score_alerts = ${set ? tx.json(alerts as never) : null} where id = ${accountId}`
    if (set)
      await addJobs(
        tx,
        rescoreAccountJobs(accountId).filter((job) => job.payload.entity === 'customer'),
      )
    else await tx`delete from customer_contributions where account_id = ${accountId}`
    return alerts
  })

export const getScoreAlerts = async (sql: Sql, accountId: number) =>
  ((await sql`select score_alerts from accounts where id = ${accountId}`)[0]?.score_alerts ?? {}) as ScoreAlerts
const own = (values: Record<string, unknown>, codename: string) =>
  Object.hasOwn(values, codename) ? values[codename] : undefined

// What a model would give one customer, computed in memory with the pure rules of score.ts (the
// twins of the SQL the scoring job runs) from its stored record and snapshots: the same inputs the
// job reads, nothing written. Beside it the scores stored now, under the model in force.
export const previewScores = async (sql: Sql, accountId: number, model: Model, externalId: string) => {
  const defs = await checkModel(sql, accountId, model, '/model')
  const [customer] = await sql`
    select c.service_id, c.attributes, c.metrics, h.engagementscore, h.fitscore, h.churn_risk, h.upsell_score,
      h.engagementscore_difference, to_char(h.last_seen, 'YYYY-MM-DD') as last_seen
    from customers c left join customer_scores h on h.account_id = c.account_id and h.customer_id = c.service_id
    where c.account_id = ${accountId} and c.external_id = ${externalId}`
  if (!customer) refuse(404, `Customer ${externalId} does not exist.`)
  const snapshots = await sql`
    select to_char(date, 'YYYY-MM-DD') as date, "values" from customer_snapshots
    where account_id = ${accountId} and customer_id = ${customer.service_id} order by date`
  const { typeOf, isMetric } = propertyLookup(defs)
  const today = utcToday()
  const valueOf = (metrics: Record<string, unknown>) => (c: string) =>
    own(isMetric(c) ? metrics : customer.attributes, c)
  const history = summarizeHistory(
    snapshots.map((s) => ({
      date: s.date as string,
      score: weightedScore(model.customer?.engagement ?? [], valueOf(s.values), s.date, typeOf).score,
    })),
    today,
  )
  const fit = weightedScore(model.customer?.fit ?? [], valueOf(customer.metrics), today, typeOf).score
  const e = history.engagementscore
  const d = history.engagementscore_difference
  const seen = history.last_seen === null ? 0 : daysBetween(history.last_seen, today)
  const scores = (s: Record<string, unknown>) => ({
    engagementscore: s.engagementscore ?? null,
    engagementscore_difference: s.engagementscore_difference ?? null,
    fitscore: s.fitscore ?? null,
    churn_risk: s.churn_risk ?? null,
    upsell_score: s.upsell_score ?? null,
    last_seen: s.last_seen ?? null,
  })
  return {
    external_id: externalId,
    current: scores(customer),
    preview: scores({
      engagementscore: e,
      engagementscore_difference: d,
      fitscore: fit,
      churn_risk: churnRisk(e, fit, d, seen),
      upsell_score: upsellScore(e, fit, d),
      last_seen: history.last_seen,
    }),
  }
}
