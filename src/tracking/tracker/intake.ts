import type { App } from '../../context.ts'
import type { Tx } from '../../db/client.ts'
import { definitionsSql } from '../../catalog/properties.ts'
import { TASKS } from '../../db/jobs.ts'
import { DATE_RULE } from '../../dates.ts'
import { pointerToken } from '../../validate.ts'
import { refuse } from '../../errors.ts'
import { jobUnlessWaiting, throughGate } from '../intake/gate.ts'

// One statement checks the account, appends every event (one JSON array text: a jsonb parameter
// would be encoded twice) and makes sure a job will apply them: a 200 means both are committed.
// add_job NOTIFYs, and PostgreSQL serializes notifying commits (docs/benchmarks.md), so a job is
// added only when none waits (jobUnlessWaiting, behind the gate). It reads graphile-worker 0.17's
// _private_jobs (test/tracking.test.ts). A date attribute's value must be a date by the one rule
// (is_iso_date); `bad` names each one that is not, and then nothing is stored.
const store = (tx: Tx, accountId: number, trackerKey: string, events: string) => tx`
  with a as (
    select tracker_key = ${trackerKey} as key_ok, cardinality(tracking_domains) > 0 as set_up
    from accounts where id = ${accountId}
  ), x as (
    select ev, i - 1 as i from jsonb_array_elements(${events}::text::jsonb) with ordinality as t(ev, i)
  ), bad as (
    select x.i, l.level, d.key
    from x cross join (values ('customer'), ('contact')) l(level)
      cross join jsonb_each(case when jsonb_typeof(x.ev->'data'->l.level) = 'object' then x.ev->'data'->l.level end) d
      join ${definitionsSql(tx, accountId)} p on p.entity = l.level and p.kind = 'attribute'
        and p.type = 'date' and p.codename = d.key
    where jsonb_typeof(d.value) = 'string' and not is_iso_date(d.value #>> '{}')
  ), e as (
    insert into tracking_events (account_id, name, occurred_at, customer_external_id, contact_external_id, data)
    select ${accountId}, x.ev->>'name', to_timestamp((x.ev->>'timestamp')::float8 / 1000),
      x.ev#>>'{identification,customer}', x.ev#>>'{identification,contact}', nullif(x.ev->'data', 'null')
    from a, x
    where a.key_ok and a.set_up and not exists (select 1 from bad)
    order by x.i
    returning id
  ), ${jobUnlessWaiting(tx, TASKS.applyEvents, accountId)}
  select a.key_ok, a.set_up, (select count(*) from j)::int as jobs, -- reading j is what runs add_job
    (select json_agg(json_build_array(i, level, key) order by i, level, key) from bad) as bad_dates
  from a`

// Appends checked events (a JSON array text, eventsToStore) and makes sure they will be applied.
// A trackerKey of another account, or an account without a tracking domain, is 403.
export const receiveEvents = async (
  app: App,
  accountId: number,
  trackerKey: string,
  events: string,
) => {
  const [account] = await throughGate(app, TASKS.applyEvents, accountId, (tx) =>
    store(tx, accountId, trackerKey, events),
  )
  if (!account?.key_ok)
    refuse(403, "The trackerKey is not the tracker key of this API key's account.")
  if (!account.set_up)
    refuse(403, 'Tracking is not set up for this account: add a tracking domain first.')
  const bad = (account.bad_dates ?? []) as [number, string, string][]
  if (bad.length) {
    refuse(
      400,
      'Some date attributes are not dates.',
      bad.map(([i, level, key]) => ({
        path: `/events/${i}/data/${level}/${pointerToken(key)}`,
        message: `Must be ${DATE_RULE}.`,
      })),
    )
  }
}
