import * as v from 'valibot'
import type { Sql } from '../db/client.ts'
import { daysBetween, today as utcToday } from '../dates.ts'
import { refuse } from '../errors.ts'
import { describe, int, strict } from '../validate.ts'
import { propertyLookup, type ScoringModel, ScoringModelSchema } from './rules/model.ts'
import { churnRisk, summarizeHistory, upsellScore, weightedScore } from './rules/score.ts'
import { checkModel } from './store.ts'

export const PreviewBody = strict({
  model: ScoringModelSchema,
  external_id: v.pipe(v.string(), v.minLength(1), v.maxLength(255)),
})

const Scores = v.object({
  engagementscore: v.nullable(int),
  engagementscore_difference: v.nullable(int),
  fitscore: v.nullable(int),
  churn_risk: v.nullable(int),
  upsell_score: v.nullable(int),
  last_seen: describe(
    v.nullable(v.string()),
    'The date of the latest scored snapshot (YYYY-MM-DD).',
  ),
})
export const ScoringPreview = v.object({
  external_id: v.string(),
  current: describe(Scores, 'The scores stored now, under the model in force.'),
  preview: describe(Scores, 'The scores the given model would give, from the same stored data.'),
})

const own = (values: Record<string, unknown>, codename: string) =>
  Object.hasOwn(values, codename) ? values[codename] : undefined

// What a model would give one customer, computed in memory with the pure rules of score.ts (the
// twins of the SQL the scoring job runs) from its stored record and snapshots: the same inputs the
// job reads, nothing written. Beside it the scores stored now, under the model in force.
export const previewScores = async (
  sql: Sql,
  accountId: number,
  model: ScoringModel,
  externalId: string,
) => {
  const defs = await checkModel(sql, accountId, model, '/model')
  const [customer] = await sql`
    select c.service_id, c.attributes, c.metrics, h.engagementscore, h.fitscore, h.churn_risk,
      h.upsell_score,
      h.engagementscore_difference, to_char(h.last_seen, 'YYYY-MM-DD') as last_seen
    from customers c left join customer_scores h on h.account_id = c.account_id
      and h.customer_id = c.service_id
    where c.account_id = ${accountId} and c.external_id = ${externalId}`
  if (!customer) refuse(404, `Customer ${externalId} does not exist.`)
  const snapshots = await sql<{ date: string; values: Record<string, unknown> }[]>`
    select to_char(date, 'YYYY-MM-DD') as date, "values" from customer_snapshots
    where account_id = ${accountId} and customer_id = ${customer.service_id} order by date`
  const { typeOf, isMetric } = propertyLookup(defs)
  const today = utcToday()
  const valueOf = (metrics: Record<string, unknown>) => (c: string) =>
    own(isMetric(c) ? metrics : customer.attributes, c)
  const history = summarizeHistory(
    snapshots.map((s) => ({
      date: s.date,
      score: weightedScore(model.customer?.engagement ?? [], valueOf(s.values), s.date, typeOf)
        .score,
    })),
    today,
  )
  const fit = weightedScore(
    model.customer?.fit ?? [],
    valueOf(customer.metrics),
    today,
    typeOf,
  ).score
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
