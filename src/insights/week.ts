// The "This week" report (docs/api.md, "This week"): what moved in an account over the last 7 or 30
// days (engagement, churns, the learned churn probability's rises), the renewals ahead and the
// account's health over 12 weeks, each number with the search that lists the customers behind it.
// In one budgeted transaction: the kept report (kept.ts: kept fresh in the background or, when none
// is kept for the period yet, computed by the statements of statements.ts and kept for the next
// report), then the explanations of the few listed.
import { readLabels } from '../catalog/properties.ts'
import { churnRiseDrivers } from '../churn/train.ts'
import type { App } from '../context.ts'
import { budgeted, type Caller } from '../db/budget.ts'
import type { Tx } from '../db/client.ts'
import { addDays, today } from '../dates.ts'
import { explanationRows } from '../scoring/changes.ts'
import { explainCustomer, labelledExplanation } from '../scoring/rules/explain.ts'
import { scoringInputs } from '../scoring/store.ts'
import type { Condition } from '../search/fields.ts'
import { keptReport } from './kept.ts'
import {
  type Listed,
  type Movement,
  MOVEMENTS,
  type Period,
  type Quadrant,
  QUADRANTS,
  RENEWAL_DAYS,
  WEEKS,
} from './statements.ts'

// A movement for the worse is explained by its risk drivers, one for the better by its health
// drivers.
const WORSE: ReadonlySet<string> = new Set(['entered_risk', 'churned', 'drops'])

// The matrix's quadrants as searches, as statements.ts counts them: engagement below 0 is churn
// risk whatever the fit; above, fit splits upsell from engaged with a poor fit (a fit not computed
// counts as 0, as in churn_risk).
const filter = (propertyName: string, operator: string, value?: number | string): Condition => ({
  propertyName,
  operator,
  ...(value !== undefined && { value: String(value) }),
})
const RISK = filter('engagementscore', 'LT', 0)
const HEALTHY = filter('engagementscore', 'GTE', 0)
export const QUADRANT_SEARCH = {
  churn_risk: RISK,
  upsell: { and: [HEALTHY, { or: [filter('fitscore', 'GTE', 0), filter('fitscore', 'UNKNOWN')] }] },
  engaged_poor_fit: { and: [HEALTHY, filter('fitscore', 'LT', 0)] },
  not_scored: filter('engagementscore', 'UNKNOWN'),
} satisfies Record<Quadrant, Condition>

// A week's figures: its counts per quadrant (QUADRANTS), then its median engagement.
const weeks = (figures: (number | null)[], now: string) =>
  Array.from({ length: WEEKS }, (_, i) => {
    const k = WEEKS - 1 - i
    const week = figures.slice(5 * k, 5 * k + 5)
    return {
      week_ending: addDays(now, -7 * k),
      median_engagement: week[4],
      quadrants: Object.fromEntries(
        QUADRANTS.map((q, j) => [
          q,
          { count: week[j] ?? 0, search: k === 0 ? QUADRANT_SEARCH[q] : null },
        ]),
      ) as Record<Quadrant, { count: number; search: Condition | null }>,
    }
  })

// A listed customer's external id and name are read with its explanation, not kept (week_reports).
interface Who {
  external_id: string
  name: string | null
  explanation: ReturnType<typeof labelledExplanation>
}
const listed = (row: Listed, who: Who, worse: boolean) => ({
  external_id: who.external_id,
  name: who.name,
  engagementscore: row.engagementscore,
  fitscore: row.fitscore,
  churn_risk: row.churn_risk,
  drivers: (worse ? who.explanation.risk_drivers : who.explanation.health_drivers).map(
    (d) => d.label,
  ),
})

// A kept report names its customers by service id: one erased since it was computed (its refresh
// still to come) is left out, as it no longer exists.
const existing = <R extends { service_id: number }>(rows: R[], explained: Map<number, Who>) =>
  rows.flatMap((row) => {
    const who = explained.get(row.service_id)
    return who ? [{ row, who }] : []
  })

// Each movement's search selects exactly the customers it counts (MOVED and churns in movements()),
// today: the engagement `days` ago is the history's entry as of since, LTD `days` is (since,
// today], and a search lists active customers unless it names is_churned (the churned one names
// it).
const moverSearch = (kind: Movement, days: Period): Condition => {
  const [before, change] = [`engagementscore_${days}d_ago`, `engagementscore_change_${days}d`]
  return {
    entered_risk: { and: [RISK, filter(before, 'GTE', 0)] },
    left_risk: { and: [HEALTHY, filter(before, 'LT', 0)] },
    drops: filter(change, 'LT', 0),
    gains: filter(change, 'GT', 0),
    churned: { and: [filter('is_churned', 'EQ', 'true'), filter('churned_date', 'LTD', days)] },
    reactivated: filter('reactivated_date', 'LTD', days),
  }[kind]
}

// The drivers of each listed customer in a word: the labels of its risk drivers when it moved for
// the worse (or renews unhealthy), of its health drivers otherwise.
const driversOf = async (tx: Tx, accountId: number, ids: number[], now: string) => {
  if (ids.length === 0) return new Map<number, Who>()
  const { model, defs } = await scoringInputs(tx, accountId, 'customer')
  const labels = await readLabels(tx, accountId, 'customer')
  const rows = await explanationRows(tx, accountId, tx`c.service_id = any(${ids}::bigint[])`)
  return new Map(
    rows.map((r) => [
      r.service_id,
      {
        external_id: r.external_id,
        name: r.name,
        explanation: labelledExplanation(explainCustomer(model, defs, r, now), labels),
      },
    ]),
  )
}

// A report kept of an earlier day is answered as of that day (its `today`); its movers are those of
// that day, which no search of today's fields selects, so its movements have no search.
export const weekReport = (app: App, accountId: number, days: Period, caller?: Caller) =>
  budgeted(app, caller, 'aggregate', async (tx, track) => {
    const current = today()
    const kept = await keptReport(tx, track, accountId, days, current)
    const { day: now, moves, rises, renewing, figures, computed_at, refreshing } = kept
    const since = addDays(now, -days)
    const renewalsEnd = addDays(now, RENEWAL_DAYS)
    const explained = await driversOf(
      tx,
      accountId,
      [...new Set([...moves, ...rises, ...renewing].map((r) => r.service_id))],
      current,
    )
    const raising = await churnRiseDrivers(
      tx,
      accountId,
      rises.map((r) => r.service_id),
    )
    const renewal = [filter('renewal_date', 'GTE', now), filter('renewal_date', 'LTE', renewalsEnd)]
    return {
      days,
      today: now,
      since,
      computed_at: computed_at.toISOString(),
      refreshing,
      movements: Object.fromEntries(
        MOVEMENTS.map((kind) => {
          const rows = moves.filter((r) => r.kind === kind)
          const customers = existing(rows, explained).map(({ row, who }) => ({
            ...listed(row, who, WORSE.has(kind)),
            engagementscore_before: row.engagementscore_before ?? null,
            date: row.date,
          }))
          const count = rows[0]?.count ?? 0
          return [
            kind,
            {
              count,
              search: count > 0 && now === current ? moverSearch(kind, days) : null,
              customers,
            },
          ]
        }),
      ) as Record<Movement, unknown>,
      churn_probability_rises: {
        count: rises[0]?.count ?? 0,
        customers: existing(rises, explained).map(({ row, who }) => ({
          external_id: who.external_id,
          name: who.name,
          churn_probability: row.churn_probability,
          churn_probability_before: row.churn_probability_before,
          drivers: raising.get(row.service_id) ?? [],
        })),
      },
      renewals: {
        from: now,
        to: renewalsEnd,
        count: renewing[0]?.count ?? 0,
        search: { and: renewal },
        at_risk: { count: renewing[0]?.at_risk ?? 0, search: { and: [...renewal, RISK] } },
        customers: existing(renewing, explained).map(({ row, who }) => ({
          ...listed(row, who, row.quadrant === 'churn_risk'),
          renewal_date: row.renewal_date,
          quadrant: row.quadrant,
        })),
      },
      weeks: weeks(figures, now),
    }
  })
