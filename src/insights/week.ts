// The "This week" report (docs/api.md, "This week"): what moved in an account over the last 7 or 30
// days, the renewals ahead and the account's health over 12 weeks, each number with the search that
// lists the customers behind it. In one budgeted transaction: the kept report, kept fresh in the
// background (or, when none is kept for the period yet, three statements over the account's
// customers, kept for the next report), then the explanations of the few listed.
import { readLabels } from '../catalog/properties.ts'
import type { App } from '../context.ts'
import { budgeted, type Caller, type Track } from '../db/budget.ts'
import type { Tx } from '../db/client.ts'
import { takeXactLock } from '../db/locks.ts'
import { addJobs, type CronPayload, weekReportJob, weekReportJobKey } from '../db/jobs.ts'
import { pendingJob } from '../db/queue.ts'
import { addDays, today } from '../dates.ts'
import { explanationRows } from '../scoring/changes.ts'
import { explainCustomer, type ExplainedCustomer, labelledExplanation } from '../scoring/explain.ts'
import { scoringInputs } from '../scoring/store.ts'
import { type Condition, PAST_DAYS } from '../search/fields.ts'
import { scoreOnSql } from '../search/predicates.ts'

// A movement's search reads the customers' engagement that many days ago (search/fields.ts).
export const PERIODS = PAST_DAYS
export type Period = (typeof PERIODS)[number]
// Each movement list shows its largest movers; its count says how many moved in all.
export const LISTED = 10
export const RENEWALS_LISTED = 25
export const RENEWAL_DAYS = 90
export const WEEKS = 12

const MOVEMENTS = ['entered_risk', 'left_risk', 'churned', 'reactivated', 'drops', 'gains'] as const
type Movement = (typeof MOVEMENTS)[number]
// A movement for the worse is explained by its risk drivers, one for the better by its health drivers.
const WORSE: ReadonlySet<string> = new Set(['entered_risk', 'churned', 'drops'])

// The matrix's quadrants (docs/console.md): engagement below 0 is churn risk whatever the fit; above,
// fit splits upsell from engaged with a poor fit. A fit not computed counts as 0, as in churn_risk.
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
} satisfies Record<string, Condition>
type Quadrant = keyof typeof QUADRANT_SEARCH

const quadrantSql = (e: string, f: string) =>
  `case when ${e} is null then 'not_scored' when ${e} < 0 then 'churn_risk' ` +
  `when coalesce(${f}, 0) >= 0 then 'upsell' else 'engaged_poor_fit' end`

// external_id and name are not kept (unnamed, below).
interface Listed {
  service_id: number
  external_id?: string
  name?: string | null
  engagementscore: number | null
  engagementscore_before?: number | null
  fitscore: number | null
  churn_risk: number | null
  date: string | null
}

// Engagement now and as of `since` (the latest history entry dated on or before it: width_bucket
// is a binary search of the sorted history_dates) of the active customers scored before the period,
// kept narrow so that it stays in memory; each movement counted in one pass over it and its first
// LISTED found by a top-N sort, never a sort of every mover. Then the churns dated in the period and
// the reactivations in it of customers still active.
const MOVED: Record<Exclude<Movement, 'churned' | 'reactivated'>, { where: string; worst: string }> = {
  entered_risk: { where: 'm.before >= 0 and m.e < 0', worst: 'm.e - m.before' },
  left_risk: { where: 'm.before < 0 and m.e >= 0', worst: 'm.before - m.e' },
  drops: { where: 'm.e < m.before', worst: 'm.e - m.before' },
  gains: { where: 'm.e > m.before', worst: 'm.before - m.e' },
}
const MOVED_COUNTS = Object.entries(MOVED)
  .map(([kind, { where }]) => `count(*) filter (where ${where})::integer as ${kind}`)
  .join(', ')
const MOVED_TOP = Object.entries(MOVED)
  .map(
    ([kind, { where, worst }]) =>
      `(select '${kind}' as kind, n.${kind} as count, m.service_id, m.before, null::text as date, ${worst} as sort ` +
      'from m, n ' +
      `where ${where} order by ${worst}, m.service_id limit ${LISTED})`,
  )
  .join(' union all ')

const movements = (tx: Tx, accountId: number, since: string, now: string) => tx`
  with m as materialized (
    select s.customer_id as service_id, s.engagementscore as e,
      s.history_scores[width_bucket(${since}::date, s.history_dates)] as before
    from customer_scores s join customers c on c.account_id = s.account_id and c.service_id = s.customer_id
    where s.account_id = ${accountId} and s.engagementscore is not null and not c.is_churned
      and s.history_dates[1] <= ${since}::date
  ), n as (select ${tx.unsafe(MOVED_COUNTS)} from m),
  churns as (
    select x.kind, count(*) over (partition by x.kind)::integer as count, x.customer_id as service_id,
      row_number() over (partition by x.kind order by x.day desc, x.customer_id) as rank,
      to_char(x.day, 'YYYY-MM-DD') as date
    from (
      select service_id as customer_id, 'churned' as kind, churned_date as day from customers
      where account_id = ${accountId} and is_churned and churned_date > ${since}::date
        and churned_date <= ${now}::date
      union all
      (select distinct on (e.customer_id) e.customer_id, 'reactivated', e.day
      from customer_churn_events e join customers c on c.account_id = e.account_id and c.service_id = e.customer_id
      where e.account_id = ${accountId} and not e.churned and not c.is_churned
        and e.day > ${since}::date and e.day <= ${now}::date
      order by e.customer_id, e.day desc)
    ) x
  ), top as (
    ${tx.unsafe(MOVED_TOP)}
    union all
    select kind, count, service_id, null, date, rank::integer from churns where rank <= ${LISTED}
  )
  select top.kind, top.count, c.service_id, c.external_id, c.name, s.engagementscore,
    top.before as engagementscore_before, s.fitscore, s.churn_risk, top.date
  from top join customers c on c.account_id = ${accountId} and c.service_id = top.service_id
    left join customer_scores s on s.account_id = c.account_id and s.customer_id = c.service_id
  order by top.kind, top.sort, top.service_id`

// Active customers whose renewal_date (a system attribute, stored as a valid YYYY-MM-DD text, whose
// text order is its date order) falls in [from, to], the least healthy first.
const renewals = (tx: Tx, accountId: number, from: string, to: string) => tx`
  with r as (
    select c.service_id, c.external_id, c.name, c.attributes->>'renewal_date' as renewal_date,
      s.engagementscore, s.fitscore, s.churn_risk
    from customers c
      left join customer_scores s on s.account_id = c.account_id and s.customer_id = c.service_id
    where c.account_id = ${accountId} and not c.is_churned
      and c.attributes->>'renewal_date' between ${from} and ${to}
  )
  select r.*, ${tx.unsafe(quadrantSql('r.engagementscore', 'r.fitscore'))} as quadrant,
    count(*) over ()::integer as count, (count(*) filter (where r.engagementscore < 0) over ())::integer as at_risk
  from r order by r.engagementscore nulls last, r.renewal_date, r.external_id limit ${RENEWALS_LISTED}`

// Customers per quadrant and the median engagement at the end of each of the last WEEKS weeks, in one
// pass over the account's customers (a row per customer and week would be 12 times as many rows to
// sort; offset 0 keeps the subquery whole, so that each week's score is looked up once per customer,
// not once per aggregate that reads it). Week 0 is now, as search sees it (the stored
// engagementscore, active customers). An earlier week takes each customer's engagement of that day
// from its history, with today's fit (fit keeps no history), and counts the customers not churned on
// that day that had a score then or existed then: an import's history reaches back before its
// customers were created.
const WEEK_COLUMNS = Array.from({ length: WEEKS }, (_, k) => {
  const day = `(t.today - ${7 * k})`
  const active = k === 0 ? 'not c.is_churned' : `(not c.is_churned or c.churned_date > ${day})`
  const score = k === 0 ? 's.engagementscore' : scoreOnSql('s', day)
  const existed = k === 0 ? 'true' : `(c.created_at at time zone 'utc')::date <= ${day}`
  return `${score} as e${k}, ${active} as a${k}, ${existed} as x${k}`
}).join(',\n')
const WEEK_AGGREGATES = Array.from(
  { length: WEEKS },
  (_, k) =>
    `count(*) filter (where a${k} and e${k} < 0)::integer, ` +
    `count(*) filter (where a${k} and e${k} >= 0 and coalesce(f, 0) >= 0)::integer, ` +
    `count(*) filter (where a${k} and e${k} >= 0 and f < 0)::integer, ` +
    `count(*) filter (where a${k} and e${k} is null and x${k})::integer, ` +
    `round((percentile_cont(0.5) within group (order by e${k}) filter (where a${k}))::numeric, 1)::float8`,
).join(',\n')

const weekFigures = async (tx: Tx, track: Track, accountId: number, now: string) => {
  const [row] = await track(
    tx`
    select array[${tx.unsafe(WEEK_AGGREGATES)}] as figures from (
      select s.fitscore as f, ${tx.unsafe(WEEK_COLUMNS)}
      from customers c
        left join customer_scores s on s.account_id = c.account_id and s.customer_id = c.service_id
        cross join (select ${now}::date as today) t
      where c.account_id = ${accountId}
      offset 0
    ) x`.values(),
  )
  return row[0] as (number | null)[]
}

const weeks = (figures: (number | null)[], now: string) =>
  Array.from({ length: WEEKS }, (_, i) => {
    const k = WEEKS - 1 - i
    const [churn_risk, upsell, engaged_poor_fit, not_scored, median] = figures.slice(5 * k, 5 * k + 5)
    return {
      week_ending: addDays(now, -7 * k),
      median_engagement: median,
      quadrants: Object.fromEntries(
        Object.entries({ churn_risk, upsell, engaged_poor_fit, not_scored }).map(([q, count]) => [
          q,
          { count: count ?? 0, search: k === 0 ? QUADRANT_SEARCH[q as Quadrant] : null },
        ]),
      ) as Record<Quadrant, { count: number; search: Condition | null }>,
    }
  })

// The report's three statements read only the account's customers and customer_scores rows, the day
// and the period, and cost a few passes over every customer, so their rows are kept in week_reports
// (sql/038, sql/042) and computed anew in the background: every write of those rows enqueues a
// refresh of the account's periods (db/jobs.ts addWeekReportRefresh), and the daily cron refreshes them for the
// new day. A request reads the kept row, whatever its day: one of an earlier day (before the daily
// refresh ran) is served as it is, as of its own day, while the request makes sure its refresh is
// queued; only a period never kept for the account is computed in the request, which then queues a
// refresh that keeps the other period too. Both paths hold the account's lock while they compute and
// keep it, and read committed gives each statement the rows committed before it: a write enqueues its
// refresh in its own transaction, which runs after it committed and, should a request still be
// computing, after that request kept its rows; so the last report kept is computed from every write.
// The drivers of the listed customers (models and labels) are read anew every time.
type Moved = Listed & { kind: Movement; count: number }
type Renewing = Listed & { renewal_date: string; quadrant: Quadrant; count: number; at_risk: number }
interface Kept {
  day: string
  moves: Moved[]
  renewing: Renewing[]
  figures: (number | null)[]
  computed_at: Date
  refreshing: boolean
}

// Kept without who they are: an erasure leaves no name behind in week_reports.
const unnamed = (key: string, value: unknown) => (key === 'external_id' || key === 'name' ? undefined : value)

const lockReports = (tx: Tx, accountId: number) => takeXactLock(tx, `week_reports:${accountId}`)

// What a report reads besides its period's movements: the same for every period of a day, so a refresh
// of both kept periods reads it once. `at` is taken before the first statement: a change committed
// after it may be missing from the reports, whose computed_at it becomes.
interface Common {
  at: Date
  renewing: Renewing[]
  figures: (number | null)[]
}
const readCommon = async (tx: Tx, track: Track, accountId: number, now: string): Promise<Common> => {
  const [{ at }] = await tx`select clock_timestamp() as at`
  const renewing = (await track(renewals(tx, accountId, now, addDays(now, RENEWAL_DAYS)))) as unknown as Renewing[]
  return { at, renewing, figures: await weekFigures(tx, track, accountId, now) }
}

// Computes and keeps a period's report. computed_ms is the time from `from` (the common part counts
// in the first period a refresh keeps), so that an account's rows add up to its refresh's time.
// Returns when it was done: the next period's `from`.
const compute = async (tx: Tx, track: Track, accountId: number, days: Period, now: string, c: Common, from: Date) => {
  const moves = (await track(movements(tx, accountId, addDays(now, -days), now))) as unknown as Moved[]
  // As text: a string sent as jsonb would be kept as one JSON string.
  await track(tx`
    insert into week_reports (account_id, days, day, computed_at, computed_ms, moves, renewing, figures)
    values (${accountId}, ${days}, ${now}::date, ${c.at}, extract(epoch from clock_timestamp() - ${from}) * 1000,
      ${JSON.stringify(moves, unnamed)}::text::jsonb, ${JSON.stringify(c.renewing, unnamed)}::text::jsonb,
      ${c.figures}::float8[])
    on conflict (account_id, days) do update set day = excluded.day, computed_at = excluded.computed_at,
      computed_ms = excluded.computed_ms, moves = excluded.moves, renewing = excluded.renewing,
      figures = excluded.figures`)
  // Read after the write, not in its RETURNING: Citus refuses a volatile function there.
  const [{ done }] = await tx`select clock_timestamp() as done`
  return done as Date
}

// `refreshing`: a write since computed_at is still to be folded in (its refresh job waits or runs; one
// that failed for good does not count). `due`: that job runs now or soon (not put off to keep the pace).
const readKept = async (tx: Tx, accountId: number, days: Period) => {
  const [kept] = await tx`
    with job as (${pendingJob(tx, weekReportJobKey(accountId))})
    select to_char(day, 'YYYY-MM-DD') as day, moves, renewing, figures, computed_at,
      exists (select 1 from job) as refreshing,
      exists (select 1 from job where locked_at is not null or run_at <= now()) as due
    from week_reports where account_id = ${accountId} and days = ${days}`
  return kept as unknown as (Kept & { due: boolean }) | undefined
}

// The period's kept report, of today or an earlier day; the first request of a period computes it.
const keptReport = async (tx: Tx, track: Track, accountId: number, days: Period, now: string): Promise<Kept> => {
  let kept = await readKept(tx, accountId, days)
  if (!kept) {
    await track(lockReports(tx, accountId))
    // Computed by another request or a refresh while this one waited for the lock?
    kept = await readKept(tx, accountId, days)
    if (!kept) {
      const c = await readCommon(tx, track, accountId, now)
      await compute(tx, track, accountId, days, now, c, c.at)
      // The other periods, in the background.
      await addJobs(tx, [weekReportJob(accountId)])
      return (await readKept(tx, accountId, days)) as Kept
    }
  }
  if (kept.day >= now) return kept
  // A day's first requests find the report of an earlier day: the first to come queues its refresh,
  // to run at once (one put off to keep the pace is brought forward; a new day is always due).
  if (!kept.due) await addJobs(tx, [weekReportJob(accountId)])
  return { ...kept, refreshing: true }
}

// Refreshes of an account take at most 1/PACE of the time: the next starts no sooner than PACE times
// the last one's duration after the last one started. An account of 100,000 customers whose writes
// never stop is then recomputed every 20 s or so (docs/benchmarks.md, "This week"), not without pause,
// and a small one at once.
const PACE = 5

// The refresh job of an account (computes every period anew when it has a report kept, or puts itself
// off to keep the pace), or the daily cron's run (no account), which adds one per account with a kept
// report.
export const refreshWeekReports = async (app: App, p: CronPayload) => {
  const accountId = p.account_id
  if (accountId === undefined) {
    const ids = await app.sql`select distinct account_id from week_reports order by account_id`
    return void (await addJobs(
      app.sql,
      ids.map((r) => weekReportJob(r.account_id as number)),
    ))
  }
  return budgeted(app, undefined, 'aggregate', async (tx, track) => {
    await track(lockReports(tx, accountId))
    const kept = await tx`
      select days, to_char(day, 'YYYY-MM-DD') as day, clock_timestamp() as now,
        min(computed_at) over () + make_interval(secs => ${PACE} * sum(computed_ms) over () / 1000.0) as due
      from week_reports where account_id = ${accountId} order by days`
    const now = today()
    if (!kept.length) return { periods: 0 }
    // Not yet due, unless the day changed or a period is not kept yet: its job (the key, given to a new
    // job as this one runs) waits.
    const complete = kept.length === PERIODS.length && kept.every((r) => r.day === now)
    if (complete && kept[0].due > kept[0].now) return void (await addJobs(tx, [weekReportJob(accountId, kept[0].due)]))
    const c = await readCommon(tx, track, accountId, now)
    let from = c.at
    for (const days of PERIODS) from = await compute(tx, track, accountId, days, now, c, from)
    return { periods: PERIODS.length }
  })
}

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
  drivers: (worse ? who.explanation.risk_drivers : who.explanation.health_drivers).map((d) => d.label),
})

// A kept report names its customers by service id: one erased since it was computed (its refresh
// still to come) is left out, as it no longer exists.
const existing = <R extends Listed>(rows: R[], explained: Map<number, Who>) =>
  rows.flatMap((row) => {
    const who = explained.get(row.service_id)
    return who ? [{ row, who }] : []
  })

// Each movement's search selects exactly the customers it counts (MOVED and churns in movements()),
// today: the engagement `days` ago is the history's entry as of since, LTD `days` is (since, today],
// and a search lists active customers unless it names is_churned (the churned one names it).
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
      r.service_id as number,
      {
        external_id: r.external_id as string,
        name: r.name as string | null,
        explanation: labelledExplanation(explainCustomer(model, defs, r as unknown as ExplainedCustomer, now), labels),
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
    const { day: now, moves, renewing, figures, computed_at, refreshing } = kept
    const since = addDays(now, -days)
    const renewalsEnd = addDays(now, RENEWAL_DAYS)
    const explained = await driversOf(
      tx,
      accountId,
      [...new Set([...moves, ...renewing].map((r) => r.service_id))],
      current,
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
          return [kind, { count, search: count > 0 && now === current ? moverSearch(kind, days) : null, customers }]
        }),
      ) as Record<Movement, unknown>,
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
