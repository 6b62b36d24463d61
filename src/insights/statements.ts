// The four statements of a "This week" report over an account's customers (kept.ts keeps their
// rows): the period's movements and churn probability rises, the renewals ahead and 12 weeks of
// health. Each is written as postgres.js fragments: the parts that vary by movement or by week are
// bound values and quoted identifiers, never SQL text built from strings.
import type { Tx } from '../db/client.ts'
import { PAST_DAYS } from '../search/fields.ts'

// A movement's search reads the customers' engagement that many days ago (search/fields.ts).
export const PERIODS = PAST_DAYS
export type Period = (typeof PERIODS)[number]
// Each movement list shows its largest movers; its count says how many moved in all.
export const LISTED = 10
export const RENEWALS_LISTED = 25
export const RENEWAL_DAYS = 90
export const WEEKS = 12

export const MOVEMENTS = [
  'entered_risk',
  'left_risk',
  'churned',
  'reactivated',
  'drops',
  'gains',
] as const
export type Movement = (typeof MOVEMENTS)[number]
// The matrix's quadrants (docs/console.md), in the order of a week's figures.
export const QUADRANTS = ['churn_risk', 'upsell', 'engaged_poor_fit', 'not_scored'] as const
export type Quadrant = (typeof QUADRANTS)[number]

// external_id and name are not kept (kept.ts).
export interface Listed {
  service_id: number
  external_id?: string
  name?: string | null
  engagementscore: number | null
  engagementscore_before?: number | null
  fitscore: number | null
  churn_risk: number | null
  date: string | null
}
export type Moved = Listed & { kind: Movement; count: number }
export type Renewing = Listed & {
  renewal_date: string
  quadrant: Quadrant
  count: number
  at_risk: number
}
export interface Rise {
  service_id: number
  churn_probability: number
  churn_probability_before: number
  count: number
}

type Fragment = ReturnType<Tx>
// Fragments in one list: postgres.js writes an array of fragments separated by spaces.
const joined = (tx: Tx, parts: Fragment[], separator: Fragment) =>
  parts.map((p, i) => (i ? tx`${separator} ${p}` : p))

// Engagement now and as of `since` (the latest history entry dated on or before it: width_bucket
// is a binary search of the sorted history_dates) of the active customers scored before the period,
// kept narrow so that it stays in memory; each movement counted in one pass over it and its first
// LISTED found by a top-N sort, never a sort of every mover. Then the churns dated in the period
// and the reactivations in it of customers still active.
type Scored = Exclude<Movement, 'churned' | 'reactivated'>
const moved = (tx: Tx): Record<Scored, { where: Fragment; worst: Fragment }> => ({
  entered_risk: { where: tx`m.before >= 0 and m.e < 0`, worst: tx`m.e - m.before` },
  left_risk: { where: tx`m.before < 0 and m.e >= 0`, worst: tx`m.before - m.e` },
  drops: { where: tx`m.e < m.before`, worst: tx`m.e - m.before` },
  gains: { where: tx`m.e > m.before`, worst: tx`m.before - m.e` },
})
const movedCounts = (tx: Tx) =>
  joined(
    tx,
    Object.entries(moved(tx)).map(
      ([kind, { where }]) => tx`count(*) filter (where ${where})::integer as ${tx(kind)}`,
    ),
    tx`,`,
  )
const movedTop = (tx: Tx) =>
  joined(
    tx,
    Object.entries(moved(tx)).map(
      ([kind, { where, worst }]) =>
        tx`(select ${kind}::text as kind, n.${tx(kind)} as count, m.service_id, m.before,
          null::text as date,
          ${worst} as sort from m, n where ${where} order by ${worst}, m.service_id
            limit ${LISTED})`,
    ),
    tx`union all`,
  )

export const movements = (tx: Tx, accountId: number, since: string, now: string) => tx<Moved[]>`
  with m as materialized (
    select s.customer_id as service_id, s.engagementscore as e,
      s.history_scores[width_bucket(${since}::date, s.history_dates)] as before
    from customer_scores s join customers c on c.account_id = s.account_id
      and c.service_id = s.customer_id
    where s.account_id = ${accountId} and s.engagementscore is not null and not c.is_churned
      and s.history_dates[1] <= ${since}::date
  ), n as (select ${movedCounts(tx)} from m),
  churns as (
    select x.kind, count(*) over (partition by x.kind)::integer as count,
      x.customer_id as service_id,
      row_number() over (partition by x.kind order by x.day desc, x.customer_id) as rank,
      to_char(x.day, 'YYYY-MM-DD') as date
    from (
      select service_id as customer_id, 'churned' as kind, churned_date as day from customers
      where account_id = ${accountId} and is_churned and churned_date > ${since}::date
        and churned_date <= ${now}::date
      union all
      (select distinct on (e.customer_id) e.customer_id, 'reactivated', e.day
      from customer_churn_events e join customers c on c.account_id = e.account_id
        and c.service_id = e.customer_id
      where e.account_id = ${accountId} and not e.churned and not c.is_churned
        and e.day > ${since}::date and e.day <= ${now}::date
      order by e.customer_id, e.day desc)
    ) x
  ), top as (
    ${movedTop(tx)}
    union all
    select kind, count, service_id, null, date, rank::integer from churns where rank <= ${LISTED}
  )
  select top.kind, top.count, c.service_id, c.external_id, c.name, s.engagementscore,
    top.before as engagementscore_before, s.fitscore, s.churn_risk, top.date
  from top join customers c on c.account_id = ${accountId} and c.service_id = top.service_id
    left join customer_scores s on s.account_id = c.account_id and s.customer_id = c.service_id
  order by top.kind, top.sort, top.service_id`

// A rise of the learned churn probability is listed from a point (0.01) up: a retraining moves
// every customer's probability a little, which no CS team would call a rise.
export const RISE = 0.01

// Active customers whose churn probability now is RISE or more above their probability as of
// `since` (the latest entry of its history dated on or before it, as for engagement), largest rise
// first, its first LISTED by a top-N sort. A customer without a probability (no ready model), or
// without one yet on `since` (first scored in the period: an index 0 reads null), has no rise.
export const rises = (tx: Tx, accountId: number, since: string) => tx<Rise[]>`
  with r as materialized (
    select s.customer_id as service_id, s.churn_probability as p,
      s.churn_history[width_bucket(${since}::date, s.churn_history_dates)] as before
    from customer_scores s join customers c on c.account_id = s.account_id
      and c.service_id = s.customer_id
    where s.account_id = ${accountId} and s.churn_probability is not null and not c.is_churned
  ), risen as materialized (select * from r where r.p - r.before >= ${RISE}::float8)
  select service_id, p as churn_probability, before as churn_probability_before,
    (select count(*) from risen)::integer as count
  from risen order by p - before desc, service_id limit ${LISTED}`

// Active customers whose renewal_date (a system attribute, stored as a valid YYYY-MM-DD text, whose
// text order is its date order) falls in [from, to], the least healthy first. The quadrant:
// engagement below 0 is churn risk whatever the fit; above, fit splits upsell from engaged with a
// poor fit. A fit not computed counts as 0, as in churn_risk.
export const renewals = (tx: Tx, accountId: number, from: string, to: string) => tx<Renewing[]>`
  with r as (
    select c.service_id, c.external_id, c.name, c.attributes->>'renewal_date' as renewal_date,
      s.engagementscore, s.fitscore, s.churn_risk
    from customers c
      left join customer_scores s on s.account_id = c.account_id and s.customer_id = c.service_id
    where c.account_id = ${accountId} and not c.is_churned
      and c.attributes->>'renewal_date' between ${from} and ${to}
  )
  select r.*, case when r.engagementscore is null then 'not_scored'
    when r.engagementscore < 0 then 'churn_risk'
      when coalesce(r.fitscore, 0) >= 0 then 'upsell' else 'engaged_poor_fit' end as quadrant,
    count(*) over ()::integer as count, (count(*) filter (where r.engagementscore < 0)
      over ())::integer as at_risk
  from r order by r.engagementscore nulls last, r.renewal_date, r.external_id
    limit ${RENEWALS_LISTED}`

// Customers per quadrant and the median engagement at the end of each of the last WEEKS weeks,
// in one pass over the account's customers (a row per customer and week would be 12 times as many
// rows to sort; offset 0 keeps the subquery whole, so that each week's score is looked up once per
// customer, not once per aggregate that reads it). Week 0 is now, as search sees it (the stored
// engagementscore, active customers). An earlier week takes each customer's engagement of that day
// from its history, with today's fit (fit keeps no history), and counts the customers not churned
// on that day that had a score then or existed then: an import's history reaches back before
// its customers were created.
const WEEK_NUMBERS = Array.from({ length: WEEKS }, (_, k) => k)
const weekColumns = (tx: Tx) =>
  joined(
    tx,
    WEEK_NUMBERS.map((k) => {
      const [e, a, x] = [tx(`e${k}`), tx(`a${k}`), tx(`x${k}`)]
      if (k === 0) return tx`s.engagementscore as ${e}, not c.is_churned as ${a}, true as ${x}`
      const day = tx`(t.today - ${7 * k}::integer)`
      return tx`s.history_scores[width_bucket(${day}, s.history_dates)] as ${e},
        (not c.is_churned or c.churned_date > ${day}) as ${a},
        (c.created_at at time zone 'utc')::date <= ${day} as ${x}`
    }),
    tx`,`,
  )
// Per week, in the order of QUADRANTS, then the median.
const weekAggregates = (tx: Tx) =>
  joined(
    tx,
    WEEK_NUMBERS.map((k) => {
      const [e, a, x] = [tx(`e${k}`), tx(`a${k}`), tx(`x${k}`)]
      return tx`count(*) filter (where ${a} and ${e} < 0)::integer,
        count(*) filter (where ${a} and ${e} >= 0 and coalesce(f, 0) >= 0)::integer,
        count(*) filter (where ${a} and ${e} >= 0 and f < 0)::integer,
        count(*) filter (where ${a} and ${e} is null and ${x})::integer,
        round((percentile_cont(0.5) within group (order by ${e}) filter (where ${a}))::numeric,
          1)::float8`
    }),
    tx`,`,
  )

export const weekFigures = (tx: Tx, accountId: number, now: string) => tx`
  select array[${weekAggregates(tx)}] as figures from (
    select s.fitscore as f, ${weekColumns(tx)}
    from customers c
      left join customer_scores s on s.account_id = c.account_id and s.customer_id = c.service_id
      cross join (select ${now}::date as today) t
    where c.account_id = ${accountId}
    offset 0
  ) x`
