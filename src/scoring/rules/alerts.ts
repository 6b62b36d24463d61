import * as v from 'valibot'
import { strict } from '../../validate.ts'

// customer.score_changed: when a score change is worth an event (docs/api.md, "Score alerts").
// The rule scores are integers in -100..100; churn_probability, the learned one, is in 0..1.
export const ALERT_SCORES = [
  'engagementscore',
  'fitscore',
  'churn_risk',
  'upsell_score',
  'churn_probability',
] as const
type AlertScore = (typeof ALERT_SCORES)[number]
export type Scores = Record<AlertScore, number | null>

const thresholds = <T extends v.GenericSchema<number>>(each: T) =>
  v.optional(v.pipe(v.array(each), v.maxLength(10, 'At most 10 thresholds.')))
const Alert = strict({
  thresholds: thresholds(v.pipe(v.number(), v.integer(), v.minValue(-100), v.maxValue(100))),
  delta: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(200))),
})
const ProbabilityAlert = strict({
  thresholds: thresholds(v.pipe(v.number(), v.minValue(0), v.maxValue(1))),
  delta: v.optional(v.pipe(v.number(), v.gtValue(0), v.maxValue(1))),
})
export const ScoreAlertsSchema = strict({
  engagementscore: v.optional(Alert),
  fitscore: v.optional(Alert),
  churn_risk: v.optional(Alert),
  upsell_score: v.optional(Alert),
  churn_probability: v.optional(ProbabilityAlert),
} satisfies Record<AlertScore, unknown>)
export type ScoreAlerts = v.InferOutput<typeof ScoreAlertsSchema>

export const ChangeDriverSchema = v.object({
  score: v.picklist(['engagement', 'fit']),
  codename: v.string(),
  before: v.pipe(
    v.number(),
    v.description("The property's contribution (weight x property score / sum of weights) before."),
  ),
  after: v.pipe(v.number(), v.description('Its contribution after.')),
})
export type ChangeDriver = v.InferOutput<typeof ChangeDriverSchema>

interface ScoreChange {
  score: AlertScore
  old_value: number
  new_value: number
  crossed: number | null
}

// A threshold t is crossed when the score goes from below t to t or above, or from t or above to
// below t. Of several crossed in one move, the one passed last (nearest the new value) is named.
const crossedThreshold = (
  thresholds: readonly number[],
  from: number,
  to: number,
): number | null => {
  const passed = thresholds.filter((t) => (from < t && to >= t) || (from >= t && to < t))
  if (passed.length === 0) return null
  return to > from ? Math.max(...passed) : Math.min(...passed)
}

// The changes of one record's scores between two scorings that the account's alerts announce.
// A score that was or is null (not scored yet, or no longer) announces nothing.
export const scoreChanges = (alerts: ScoreAlerts, before: Scores, after: Scores): ScoreChange[] =>
  ALERT_SCORES.flatMap((score) => {
    const alert = alerts[score]
    const [from, to] = [before[score], after[score]]
    if (!alert || from === null || to === null || from === to) return []
    const crossed = crossedThreshold(alert.thresholds ?? [], from, to)
    const moved = alert.delta !== undefined && Math.abs(to - from) >= alert.delta
    return crossed !== null || moved ? [{ score, old_value: from, new_value: to, crossed }] : []
  })
