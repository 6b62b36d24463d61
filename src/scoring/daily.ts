import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addJobs, addWeekReportRefresh, type CronPayload, scoreDailyJob } from '../db/jobs.ts'
import { today as utcToday } from '../dates.ts'
import type { Log } from '../log.ts'
import type { EventItem } from '../webhooks/events.ts'
import { enqueueEvent } from '../webhooks/outbox.ts'
import { scoreRecords } from './batch.ts'
import { recordChurnEvents } from './churn.ts'

// With churn.inactive_days set, a customer whose last_seen is older than that many days becomes
// churned as of today ('inactive', which a newer snapshot lifts: see score-records.ts). Customers
// never seen (no scored snapshot) are left alone: there is no activity to judge them by. A churned
// customer, manual or automatic, keeps its churn date.
// The rows are locked in service_id order first, as every writer of records does (src/db/locks.ts).
const markInactive = (sql: Tx, accountId: number, today: string) => sql<
  EventItem<'customer.churned'>[]
>`
  with inactive as (
    select c.service_id from customers c join scoring_models m on m.account_id = c.account_id
      join customer_scores h on h.account_id = c.account_id and h.customer_id = c.service_id
    where c.account_id = ${accountId} and not c.is_churned
      and (m.model->'churn'->>'inactive_days') is not null
      and h.last_seen < ${today}::date - (m.model->'churn'->>'inactive_days')::integer
    order by c.service_id for no key update of c
  )
  update customers c set is_churned = true, churned_date = ${today}::date, churn_reason = 'inactive'
  from inactive i where c.account_id = ${accountId} and c.service_id = i.service_id
  returning c.service_id, c.external_id, c.name, ${today} as churned_date, 'inactive' as reason`

// What changes with the date alone: the trend window, fit date properties (e.g. renewal_date),
// days since last_seen in churn risk, and automatic churn. The engagement history does not (a
// snapshot's scoring date is its own), so it is read as stored, not recomputed.
export const scoreDaily = async (sql: Sql, accountId: number, today = utcToday(), log?: Log) => {
  await scoreRecords(
    sql,
    { account_id: accountId, entity: 'customer' },
    { today, snapshots: false, log },
  )
  await scoreRecords(
    sql,
    { account_id: accountId, entity: 'contact' },
    { today, snapshots: false, log },
  )
  return sql.begin(async (tx) => {
    const churned = await markInactive(tx, accountId, today)
    await enqueueEvent(tx, accountId, 'customer.churned', churned)
    if (churned.count > 0) {
      await recordChurnEvents(
        tx,
        accountId,
        churned.map((c) => ({
          service_id: c.service_id,
          churned: true,
          churned_date: today,
          reason: 'inactive',
        })),
      )
      await addWeekReportRefresh(tx, accountId)
    }
    return churned.count
  })
}

// The cron run (no account_id) adds one job per account with a scoring model, on the account's
// scoring queue; the job key keeps a second run from doubling the work.
export const scoreDailyRun = async (app: App, p: CronPayload) => {
  if (p.account_id !== undefined)
    return void (await scoreDaily(app.sql, p.account_id, utcToday(), app.log))
  const ids = (
    await app.sql<{ account_id: number }[]>`
      select account_id from scoring_models order by account_id`
  ).map((r) => r.account_id)
  await addJobs(app.sql, ids.map(scoreDailyJob))
}
