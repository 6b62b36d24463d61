import type { Entity } from '../../property.ts'
import { accountsWithNumberMetrics, definitionsSql } from '../../catalog/properties.ts'
import type { App } from '../../context.ts'
import type { Sql, Tx } from '../../db/client.ts'
import { addJobs, countEventsJob, type CronPayload, scoreRecordsJobs } from '../../db/jobs.ts'
import { TABLES } from '../../db/tables.ts'
import { today } from '../../dates.ts'
import { mergeStagedSnapshots } from '../../uploads/merge.ts'

// Today's (UTC) value of every number metric whose codename is an event name is
// the count of such events in the 30 days before now (a contact's own events; all events of a
// customer). Records with no such event but a non-zero latest value drop to 0, so a count cannot
// stay stuck once its events age out; other records get no snapshot (it would look like activity).
// Staged as stage_snapshots(record_id, date, vals), the shape the upload merge writes from.
const stageCounts = (tx: Tx, accountId: number, level: Entity) => {
  const { records, fk } = TABLES[level]
  return tx`
    create temp table stage_snapshots on commit drop as
    with defs as (
      select p.codename from ${definitionsSql(tx, accountId)} p
      where p.entity = ${level} and p.kind = 'metric' and p.type = 'number'
        and exists (select 1 from tracking_events e where e.account_id = ${accountId}
          and e.name = p.codename)
    ), counts as (
      select e.${tx(fk)} as record_id, e.name, count(*)::int as n
      from tracking_events e join defs d on d.codename = e.name
      where e.account_id = ${accountId} and e.${tx(fk)} is not null
        and e.occurred_at > now() - interval '30 days' and e.occurred_at <= now()
      group by 1, 2
    ), lapsed as (
      select r.service_id as record_id, d.codename as name, 0 as n
      from ${tx(records)} r join defs d on r.metrics->d.codename <> '0'::jsonb
      where r.account_id = ${accountId}
        and not exists (select 1 from counts c where c.record_id = r.service_id
          and c.name = d.codename)
    )
    select record_id, ${today()}::date as date, jsonb_object_agg(name, n) as vals
    from (select * from counts union all select * from lapsed) x
    group by record_id`
}

const countLevel = async (tx: Tx, accountId: number, level: Entity) => {
  await stageCounts(tx, accountId, level)
  await mergeStagedSnapshots(tx, accountId, TABLES[level].collection)
  const ids = (await tx`select record_id from stage_snapshots order by record_id`).map(
    (r) => r.record_id as number,
  )
  await tx`drop table stage_snapshots`
  await addJobs(tx, scoreRecordsJobs(accountId, level, ids))
  return ids.length
}

// One account in one transaction: snapshots, metrics and the scoring jobs commit together.
export const countAccountEvents = (sql: Sql, accountId: number) =>
  sql.begin(async (tx) => ({
    account_id: accountId,
    customers: await countLevel(tx, accountId, 'customer'),
    contacts: await countLevel(tx, accountId, 'contact'),
  }))

// The daily cron run (no account_id) adds one job per account with a number metric (the only ones
// that can have a metric named like an event) on the account's queue, so each account's counts
// run after the events it has already received are applied. The job key keeps a second run from
// doubling the work.
export const countEvents = async (app: App, p: CronPayload) => {
  if (p.account_id !== undefined) return void (await countAccountEvents(app.sql, p.account_id))
  await addJobs(app.sql, (await accountsWithNumberMetrics(app.sql)).map(countEventsJob))
}
