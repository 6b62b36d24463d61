import * as v from 'valibot'
import { Where } from '../records/search-body.ts'
import { Day, describe, int, Probability, Timestamp } from '../validate.ts'
import { LISTED, RENEWAL_DAYS, RENEWALS_LISTED, RISE, WEEKS } from './statements.ts'

// The "This week" answer (docs/api.md, "This week"); test/contract.test.ts checks live
// answers against it.

const Score = v.nullable(int)
const Search = describe(
  v.nullable(Where),
  'The where tree that lists the customers behind this number: POST {"where": ...} to /api/v1/customers/search. ' +
    "A movement's selects every customer it counts, not only those listed. Null for a movement nobody made, " +
    'for the movements of a report kept from an earlier day, and for earlier weeks (past scores).',
)
const listedFields = {
  external_id: v.string(),
  name: v.nullable(v.string()),
  engagementscore: Score,
  fitscore: Score,
  churn_risk: Score,
  drivers: describe(
    v.array(v.string()),
    'Up to three properties, by label (else codename), that drive the move: risk drivers for a move for the worse ' +
      'or an unhealthy renewal, health drivers otherwise.',
  ),
}

const Mover = v.object({
  ...listedFields,
  engagementscore_before: describe(
    Score,
    'Engagement at the start of the period (null for churns and reactivations).',
  ),
  date: describe(v.nullable(Day), 'The churn or reactivation date; null for score movements.'),
})

const MovementList = (what: string) =>
  describe(
    v.object({
      count: describe(int, 'How many customers in all.'),
      search: Search,
      customers: describe(v.array(Mover), `The first ${LISTED}: ${what}.`),
    }),
    what,
  )

const Rise = v.object({
  external_id: v.string(),
  name: v.nullable(v.string()),
  churn_probability: describe(Probability, 'The learned churn probability now.'),
  churn_probability_before: describe(
    Probability,
    'The probability on `since` (as of the latest scoring before).',
  ),
  drivers: describe(
    v.array(v.string()),
    'Up to three properties, by label (else codename), that raise the probability most (churn_drivers.up).',
  ),
})

const Quadrant = v.picklist(['churn_risk', 'upsell', 'engaged_poor_fit', 'not_scored'])
const QuadrantCount = v.object({ count: int, search: Search })

export const WeekReport = v.object({
  days: describe(v.picklist([7, 30]), 'The period: the last 7 or 30 days.'),
  today: Day,
  since: describe(
    Day,
    'The start of the period: movements compare engagement on this day with now.',
  ),
  computed_at: describe(
    Timestamp,
    'When the numbers and lists were computed: the report is kept, and computed anew in the background a few ' +
      'seconds after any change of the account\'s customers or scores (docs/api.md, "This week").',
  ),
  refreshing: describe(
    v.boolean(),
    'True while a change since computed_at is still to be folded in (its recomputation waits or runs).',
  ),
  movements: v.object({
    entered_risk: MovementList(
      'Active customers whose engagement fell below 0 (churn risk), largest fall first',
    ),
    left_risk: MovementList(
      'Active customers whose engagement rose from below 0 to 0 or more, largest rise first',
    ),
    churned: MovementList('Customers churned with a churn date in the period, latest first'),
    reactivated: MovementList('Customers reactivated in the period and active now, latest first'),
    drops: MovementList('Active customers whose engagement fell, largest drop first'),
    gains: MovementList('Active customers whose engagement rose, largest gain first'),
  }),
  churn_probability_rises: describe(
    v.object({
      count: describe(int, 'How many customers in all.'),
      customers: describe(v.array(Rise), `The first ${LISTED}, largest rise first.`),
    }),
    `Active customers whose learned churn probability rose by ${RISE * 100} point or more since \`since\` ` +
      '(none without a ready churn model, nor for a customer first scored in the period): no search field holds ' +
      'a past probability, so the count has no search.',
  ),
  renewals: v.object({
    from: Day,
    to: describe(Day, `${RENEWAL_DAYS} days after today.`),
    count: int,
    search: Search,
    at_risk: describe(QuadrantCount, 'The renewals in churn risk (engagement below 0).'),
    customers: describe(
      v.array(v.object({ ...listedFields, renewal_date: Day, quadrant: Quadrant })),
      `The first ${RENEWALS_LISTED}, least engaged first (not scored last), then by renewal date.`,
    ),
  }),
  weeks: describe(
    v.array(
      v.object({
        week_ending: Day,
        median_engagement: v.nullable(v.number()),
        quadrants: v.object({
          churn_risk: QuadrantCount,
          upsell: QuadrantCount,
          engaged_poor_fit: QuadrantCount,
          not_scored: QuadrantCount,
        }),
      }),
    ),
    `${WEEKS} weeks, oldest first, the last ending today; only the last week's counts have a search.`,
  ),
})
