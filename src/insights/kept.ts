// The kept "This week" reports (week_reports): the rows of the report's four statements
// (statements.ts), computed in the background or, for a period never kept, in the request.
import type { App } from '../context.ts'
import { budgeted, type Track } from '../db/budget.ts'
import type { Tx } from '../db/client.ts'
import { addJobs, type CronPayload, weekReportJob, weekReportJobKey } from '../db/jobs.ts'
import { takeXactLock } from '../db/locks.ts'
import { pendingJob } from '../db/queue.ts'
import { addDays, today } from '../dates.ts'
import {
  type Moved,
  movements,
  type Period,
  PERIODS,
  RENEWAL_DAYS,
  type Renewing,
  type Rise,
  renewals,
  rises,
  weekFigures,
} from './statements.ts'

// The report's four statements read only the account's customers and customer_scores rows, the day
// and the period, and cost a few passes over every customer, so their rows are kept in week_reports
// (sql/038, sql/042) and computed anew in the background: every write of those rows enqueues a
// refresh of the account's periods (db/jobs.ts addWeekReportRefresh), and the daily cron refreshes
// them for the new day. A request reads the kept row, whatever its day: one of an earlier day
// (before the daily refresh ran) is served as it is, as of its own day, while the request makes
// sure its refresh is queued; only a period never kept for the account is computed in the request,
// which then queues a refresh that keeps the other period too. Both paths hold the account's lock
// while they compute and keep it, and read committed gives each statement the rows committed before
// it: a write enqueues its refresh in its own transaction, which runs after it committed and,
// should a request still be computing, after that request kept its rows; so the last report kept
// is computed from every write. The drivers of the listed customers (models and labels) are read
// anew every time (week.ts).
export interface Kept {
  day: string
  moves: Moved[]
  rises: Rise[]
  renewing: Renewing[]
  figures: (number | null)[]
  computed_at: Date
  refreshing: boolean
}

// Kept without who they are: an erasure leaves no name behind in week_reports.
const unnamed = (key: string, value: unknown) =>
  key === 'external_id' || key === 'name' ? undefined : value

const lockReports = (tx: Tx, accountId: number) => takeXactLock(tx, `week_reports:${accountId}`)

// What a report reads besides its period's movements: the same for every period of a day, so a
// refresh of both kept periods reads it once. `at` is taken before the first statement: a change
// committed after it may be missing from the reports, whose computed_at it becomes.
interface Common {
  at: Date
  renewing: Renewing[]
  figures: (number | null)[]
}
const readCommon = async (
  tx: Tx,
  track: Track,
  accountId: number,
  now: string,
): Promise<Common> => {
  const [{ at }] = await tx<{ at: Date }[]>`select clock_timestamp() as at`
  const renewing = await track(renewals(tx, accountId, now, addDays(now, RENEWAL_DAYS)))
  const [row] = await track(weekFigures(tx, accountId, now).values())
  return { at, renewing, figures: row[0] as (number | null)[] }
}

// Computes and keeps a period's report. computed_ms is the time from `from` (the common part counts
// in the first period a refresh keeps), so that an account's rows add up to its refresh's time.
// Returns when it was done: the next period's `from`.
const compute = async (
  tx: Tx,
  track: Track,
  accountId: number,
  days: Period,
  now: string,
  c: Common,
  from: Date,
) => {
  const since = addDays(now, -days)
  const moves = await track(movements(tx, accountId, since, now))
  const risen = await track(rises(tx, accountId, since))
  // As text: a string sent as jsonb would be kept as one JSON string.
  await track(tx`
    insert into week_reports (account_id, days, day, computed_at, computed_ms, moves, rises,
      renewing, figures)
    values (${accountId}, ${days}, ${now}::date, ${c.at},
      extract(epoch from clock_timestamp() - ${from}) * 1000,
      ${JSON.stringify(moves, unnamed)}::text::jsonb, ${JSON.stringify(risen)}::text::jsonb,
      ${JSON.stringify(c.renewing, unnamed)}::text::jsonb, ${c.figures}::float8[])
    on conflict (account_id, days) do update set day = excluded.day,
      computed_at = excluded.computed_at,
      computed_ms = excluded.computed_ms, moves = excluded.moves, rises = excluded.rises,
      renewing = excluded.renewing, figures = excluded.figures`)
  // Read after the write, not in its RETURNING: Citus refuses a volatile function there.
  const [{ done }] = await tx<{ done: Date }[]>`select clock_timestamp() as done`
  return done
}

// `refreshing`: a write since computed_at is still to be folded in (its refresh job waits or
// runs; one that failed for good does not count). `due`: that job runs now or soon (not put
// off to keep the pace).
const readKept = async (tx: Tx, accountId: number, days: Period) => {
  const [kept]: ((Kept & { due: boolean }) | undefined)[] = await tx<(Kept & { due: boolean })[]>`
    with job as (${pendingJob(tx, weekReportJobKey(accountId))})
    select to_char(day, 'YYYY-MM-DD') as day, moves, rises, renewing, figures, computed_at,
      exists (select 1 from job) as refreshing,
      exists (select 1 from job where locked_at is not null or run_at <= now()) as due
    from week_reports where account_id = ${accountId} and days = ${days}`
  return kept
}

// The period's kept report, of today or an earlier day; the first request of a period computes it.
export const keptReport = async (
  tx: Tx,
  track: Track,
  accountId: number,
  days: Period,
  now: string,
): Promise<Kept> => {
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

// Refreshes of an account take at most 1/PACE of the time: the next starts no sooner than PACE
// times the last one's duration after the last one started. An account of 100,000 customers whose
// writes never stop is then recomputed every 20 s or so (docs/benchmarks-history.md, "This week"),
// not without pause, and a small one at once.
const PACE = 5

// The refresh job of an account (computes every period anew when it has a report kept, or
// puts itself off to keep the pace), or the daily cron's run (no account), which adds one per
// account with a kept report.
export const refreshWeekReports = async (app: App, p: CronPayload) => {
  const accountId = p.account_id
  if (accountId === undefined) {
    const ids = await app.sql<{ account_id: number }[]>`
      select distinct account_id from week_reports order by account_id`
    return void (await addJobs(
      app.sql,
      ids.map((r) => weekReportJob(r.account_id)),
    ))
  }
  return budgeted(app, undefined, 'aggregate', async (tx, track) => {
    await track(lockReports(tx, accountId))
    const kept = await tx`
      select days, to_char(day, 'YYYY-MM-DD') as day, clock_timestamp() as now,
        min(computed_at) over () + make_interval(secs => ${PACE} * sum(computed_ms)
          over () / 1000.0) as due
      from week_reports where account_id = ${accountId} order by days`
    const now = today()
    if (!kept.length) return { periods: 0 }
    // Not yet due, unless the day changed or a period is not kept yet: its job (the key, given to a
    // new job as this one runs) waits.
    const complete = kept.length === PERIODS.length && kept.every((r) => r.day === now)
    if (complete && kept[0].due > kept[0].now)
      return void (await addJobs(tx, [weekReportJob(accountId, kept[0].due)]))
    const c = await readCommon(tx, track, accountId, now)
    let from = c.at
    for (const days of PERIODS) from = await compute(tx, track, accountId, days, now, c, from)
    return { periods: PERIODS.length }
  })
}
