import * as v from 'valibot'
import { ChurnDrivers } from '../churn/schemas.ts'
import { ChangeDriverSchema } from '../scoring/rules/alerts.ts'
import { Day, describe, int, Probability, Timestamp } from '../validate.ts'

// The records as the search, aggregate and single-record routes answer them (test/contract.test.ts
// checks every answer against these).

const Score = v.nullable(int)
const Value = v.union([v.string(), v.number(), v.boolean(), v.null()])

const Trend = describe(
  v.nullable(v.record(v.pipe(v.string(), v.isoDate()), v.number())),
  'Engagement score by date: up to 15 scored snapshots of the last 365 days.',
)
const Properties = describe(
  v.record(v.string(), Value),
  'Every defined attribute and metric the record has a value for, by codename (metrics: the latest value).',
)
const recordFields = {
  id: describe(v.string(), 'The external id the client gave it.'),
  service_id: describe(
    int,
    'The id the service gave it; stable, and what paging.next.after names.',
  ),
  name: describe(v.nullable(v.string()), 'Null for a record that tracking created without a name.'),
}
const recordTail = {
  properties: Properties,
  createdAt: Timestamp,
  updatedAt: Timestamp,
}
const tags = describe(v.array(v.string()), 'Tag titles, in byte order.')
const engagement = {
  engagementscore: describe(
    Score,
    'Engagement (-100 to 100) of the latest snapshot; null until scored.',
  ),
  engagementscore_difference: describe(
    v.nullable(v.number()),
    'Change of the engagement score against the snapshot about 30 days earlier; null without one.',
  ),
  engagementscore_trend: Trend,
  last_seen: describe(v.nullable(Day), 'The date of the latest metrics snapshot.'),
}

export const Customer = v.object({
  ...recordFields,
  fitscore: describe(
    Score,
    'Fit (-100 to 100) of the attributes and latest metrics; null until scored.',
  ),
  engagementscore: engagement.engagementscore,
  churn_risk: describe(Score, 'Churn risk, 0 to 100; null until scored.'),
  upsell_score: describe(Score, 'Upsell potential, 0 to 100; null until scored.'),
  churn_probability: describe(
    v.nullable(Probability),
    "The learned churn model's calibrated probability, 0 to 1; null without a ready model.",
  ),
  is_churned: v.boolean(),
  last_seen: engagement.last_seen,
  engagementscore_difference: engagement.engagementscore_difference,
  engagementscore_trend: engagement.engagementscore_trend,
  owner: describe(v.nullable(v.string()), "The owner's email."),
  tags,
  ...recordTail,
})

export const Contact = v.object({
  ...recordFields,
  ...engagement,
  tags,
  customer_external_id: v.string(),
  customer_service_id: int,
  ...recordTail,
})

const label = describe(v.string(), "The property's label, else its codename.")
const Contribution = v.object({ codename: v.string(), label, contribution: v.number() })
const Driver = v.object({
  codename: v.string(),
  label,
  score: v.picklist(['engagement', 'fit']),
  contribution: v.number(),
})
const ScoreExplanation = describe(
  v.nullable(
    v.object({
      engagement: describe(
        v.array(Contribution),
        'Each engagement rule: its weighted contribution, in points.',
      ),
      fit: describe(v.array(Contribution), 'Each fit rule: its weighted contribution, in points.'),
      risk_drivers: describe(
        v.array(Driver),
        'Up to 3 rules that lower the scores most, most negative first.',
      ),
      health_drivers: describe(
        v.array(Driver),
        'Up to 3 rules that raise the scores most, largest first.',
      ),
      change_drivers: describe(
        v.array(v.object({ ...ChangeDriverSchema.entries, label })),
        'Up to 3 rules whose contributions moved most in the latest scoring that changed the scores, largest ' +
          'move first; empty until score alerts are set (PUT /admin/v1/accounts/{id}/score-alerts).',
      ),
    }),
  ),
  'Why the scores are what they are (docs/scoring.md).',
)

export const CustomerWithExplanation = v.object({
  ...Customer.entries,
  score_explanation: ScoreExplanation,
  churn_drivers: ChurnDrivers,
})

const page = <S extends v.GenericSchema>(item: S) =>
  v.object({
    results: v.array(item),
    paging: describe(
      v.optional(
        v.object({
          next: v.object({
            after: describe(
              v.union([int, v.string()]),
              "The last record's service_id; under a sort, an opaque signed cursor of its sort values.",
            ),
          }),
        }),
      ),
      'Present when there is a next page: send `after` back, as it came, with the same request to get it.',
    ),
    total: describe(v.optional(int), 'With `count`: how many records match, paging aside.'),
    total_is_estimate: describe(
      v.optional(v.literal(true)),
      'With `count: "estimate"`: total is the planner\'s.',
    ),
  })
export const CustomerPage = page(Customer)
export const ContactPage = page(Contact)

const Bucket = v.object({ from: v.number(), to: v.number(), count: int })
const FieldAggregate = v.object({
  field: v.string(),
  count: describe(int, 'How many matches have a value.'),
  avg: v.nullable(v.number()),
  min: v.nullable(v.number()),
  max: v.nullable(v.number()),
  histogram: describe(
    v.array(Bucket),
    'Equal buckets from min to max, each with its lower bound, the last with max as well; one bucket when all ' +
      'values are equal, none without values.',
  ),
})
const Point = v.object({
  id: v.string(),
  name: v.string(),
  engagementscore: int,
  fitscore: int,
  churn_risk: Score,
  churn_probability: describe(
    v.nullable(Probability),
    'The learned churn probability (null without a ready model).',
  ),
})
export const CustomerAggregate = v.object({
  count: describe(int, 'How many customers match.'),
  fields: describe(v.array(FieldAggregate), 'Each field asked for, in order.'),
  grid: describe(
    v.optional(
      v.object({
        scored: describe(int, 'Matches with both scores, the ones counted in the cells.'),
        counts: describe(
          v.array(v.array(int)),
          'counts[i][j]: engagement in cell i and fit in cell j, cells of 20 points from -100, the last with 100.',
        ),
        churn_probability: describe(
          v.array(v.array(v.nullable(Probability))),
          "churn_probability[i][j]: the mean learned churn probability of cell i, j's customers that have one " +
            '(null for a cell with none: empty, or no ready model).',
        ),
      }),
    ),
    'With matrix "grid".',
  ),
  points: describe(
    v.optional(
      v.object({
        scored: describe(int, 'Matches with both scores.'),
        sampled: describe(v.boolean(), 'More are scored than items holds.'),
        items: describe(v.array(Point), 'In sample order: by the MD5 of the external id.'),
      }),
    ),
    'With matrix "points".',
  ),
})
