import type { PropertyDef } from '../../property.ts'
import { propertyLookup, type Rule, type ScoringModel } from './model.ts'
import { explain, weightedScore, type Explanation } from './score.ts'

export interface ExplainedCustomer {
  attributes: Record<string, unknown>
  /** Each metric's value in its latest snapshot. */
  metrics: Record<string, unknown>
  last_seen: string | null
  /** The metric values of the snapshot dated last_seen, the one engagementscore is the score of. */
  snapshot: Record<string, unknown> | null
}

const own = (values: Record<string, unknown>, codename: string) =>
  Object.hasOwn(values, codename) ? values[codename] : undefined

// score_explanation of the single-customer read (docs/scoring.md). Engagement is explained as
// engagementscore was computed: the snapshot dated last_seen, date properties relative to that
// date, so that the contributions add up to the score; without a scored snapshot there is nothing
// to explain. Fit is explained as the job scores it: current attributes, latest metric values,
// date properties relative to today.
export const explainCustomer = (
  model: ScoringModel | null,
  defs: readonly PropertyDef[],
  row: ExplainedCustomer,
  today: string,
): Explanation => {
  const { typeOf, isMetric } = propertyLookup(defs)
  const contributions = (
    rules: Rule[] | undefined,
    metrics: Record<string, unknown>,
    date: string,
  ) =>
    weightedScore(rules ?? [], (c) => own(isMetric(c) ? metrics : row.attributes, c), date, typeOf)
      .contributions
  const engagement =
    row.last_seen === null || row.snapshot === null
      ? []
      : contributions(model?.customer?.engagement, row.snapshot, row.last_seen)
  return explain(engagement, contributions(model?.customer?.fit, row.metrics, today))
}

// An explanation as people read it: each rule's property also by its label, the codename where it
// has none (labels: codename -> label).
export const labelled = <E extends { codename: string }>(
  items: readonly E[],
  labels: Record<string, string>,
) =>
  items.map((item) => ({
    ...item,
    label: Object.hasOwn(labels, item.codename) ? labels[item.codename] : item.codename,
  }))

export const labelledExplanation = (e: Explanation, labels: Record<string, string>) => ({
  engagement: labelled(e.engagement, labels),
  fit: labelled(e.fit, labels),
  risk_drivers: labelled(e.risk_drivers, labels),
  health_drivers: labelled(e.health_drivers, labels),
})
