import * as v from 'valibot'
import { strict } from '../../validate.ts'

// customer.score_changed: when a score change is worth an event (docs/api.md, "Score alerts").
export const ALERT_SCORES = ['engagementscore', 'fitscore', 'churn_risk', 'upsell_score'] as const
type AlertScore = (typeof ALERT_SCORES)[number]
export type Scores = Record<AlertScore, number | null>

const Alert = strict({
  thresholds: v.optional(
    v.pipe(
      v.array(v.pipe(v.number(), v.integer(), v.minValue(-100), v.maxValue(100))),
      v.maxLength(10, 'At most 10 thresholds.'),
    ),
  ),
  delta: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(200))),
})
export const ScoreAlertsSchema = strict(
  Object.fromEntries(ALERT_SCORES.map((s) => [s, v.optional(Alert)])) as {
    [S in AlertScore]: v.OptionalSchema<typeof Alert, undefined>
  },
)
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
const crossedThreshold = (thresholds: readonly number[], from: number, to: number): number | null => {
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
