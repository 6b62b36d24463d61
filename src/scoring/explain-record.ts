import { propertyLookup, type CatalogDef, type Rule, type ScoringModel } from './model.ts'
import { explain, weightedScore, type Explanation } from './score.ts'

export interface ExplainedCustomer {
  attributes: Record<string, unknown>
  /** Each metric's value in its latest snapshot. */
  metrics: Record<string, unknown>
  last_seen: string | null
}

// score_explanation of the single-customer read (SPEC section 6). Engagement is explained as of
// last_seen, the date of the latest score, over the latest metric values; without a scored
// snapshot there is no engagement to explain. Fit is explained as the job scores it: current
// values, date properties relative to today.
export const explainCustomer = (model: ScoringModel | null, defs: readonly CatalogDef[], row: ExplainedCustomer, today: string): Explanation => {
  const { typeOf, isMetric } = propertyLookup(defs)
  const valueOf = (codename: string) => {
    const values = isMetric(codename) ? row.metrics : row.attributes
    return Object.hasOwn(values, codename) ? values[codename] : undefined
  }
  const contributions = (rules: Rule[] | undefined, date: string | null) =>
    date === null ? [] : weightedScore(rules ?? [], valueOf, date, typeOf).contributions
  return explain(contributions(model?.customer?.engagement, row.last_seen), contributions(model?.customer?.fit, today))
}
