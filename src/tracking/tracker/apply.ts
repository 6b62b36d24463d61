import type { PendingQuery, Row } from 'postgres'
import type { App } from '../../context.ts'
import { definitionsSql } from '../../catalog/properties.ts'
import type { Tx } from '../../db/client.ts'
import { PLANNER, setLocal } from '../../db/planner.ts'
import {
  type AccountPayload,
  addCustomersChanged,
  addJobs,
  scoreRecordsJobs,
  TASKS,
} from '../../db/jobs.ts'
import { lockRecordsIn } from '../../db/locks.ts'
import { applyBatches } from '../intake/batches.ts'
import { passGate } from '../intake/gate.ts'
import {
  type Cursor,
  lockAndReadCursor,
  type Move,
  moveCursor,
  nextBelow,
  nextCheck,
} from '../intake/cursor.ts'
import { createContactsSql, updateRecords } from '../intake/records.ts'
import { countDropped, suppressedSql } from '../suppressions.ts'

// At most this many events per transaction.
export const EVENTS_PER_BATCH = 5000

// A job applies every event of its account still 'received', in batches, in id order. The intake
// adds the job only when the account has none waiting (tracker/intake.ts), so under load one job
// takes many requests' events. All set-based; a second run finds nothing to do. The tracker
// updates and creates contacts but never creates a customer, and never sends a webhook.

// The tracker's one seam: events another intake stored (message_id set; the relay's tracks,
// relay/tracks.ts, are the ones there are) that wait for that intake's own job, and what that
// intake keeps of the ones the tracker applies or drops. tracking/apply.ts plugs the relay in.
type Fragment = PendingQuery<Row[]>
export interface Relayed {
  // From when such events wait (an expression; null: none waits).
  waitingSince: (tx: Tx, accountId: number) => Fragment
  // Drops the staged ones that the other intake received first as a message of its own; how many.
  dropDuplicates: (
    tx: Tx,
    accountId: number,
    range: { first: number; last: number },
  ) => Promise<number>
  // Keeps, as that intake's, the suppressed ones dropped: `rows` yields (message_id, occurred_at).
  dropped: (tx: Tx, accountId: number, rows: Fragment) => Fragment
  // Counts the batch's (those still staged, and the `suppressed`); how many.
  count: (tx: Tx, accountId: number, suppressed: number) => Promise<number>
  // The counters, once the batch has committed.
  counted: (batch: { tracks: number; suppressed: number; duplicates: number }) => void
}

// The events to apply, matched to their customers by external id and to the contacts those
// customers already have (a contact id that belongs to another customer is neither moved nor
// updated by the tracker), with data.customer and data.contact when they are objects (null is no
// data). Ids past the sequence's last id at the batch's start wait for the next batch: their
// inserts began after this job was taken, so they have added the next job. Returns the range of
// ids staged, which bounds the events' update, and whether events up to that last id still wait.
// Each event finds its customer and contact through their unique indexes (OFFSET 0 keeps each
// lookup a subquery of its own): planned as joins while the new events were missing from the
// statistics, every event read all the account's customers (1 s a batch at 1,000 customers;
// docs/benchmarks.md). Relayed events (message_id set) come after what their intake received before
// them or with them (the relay's group that creates their customer): the batch stops short of the
// first one received no sooner than `relayed.waitingSince`, and what it stopped short of waits
// (`waiting`) for a later job.
interface Staged {
  n: number
  first: number | null
  last: number | null
  waiting: boolean
}
const stageEvents = async (
  tx: Tx,
  accountId: number,
  below: number,
  lastId: number,
  relayed: Relayed,
) => {
  await setLocal(tx, PLANNER.freshEvents)
  const received = tx`account_id = ${accountId} and id between ${below} and ${lastId}
    and status = 'received'`
  await tx`
  create temp table stage_events on commit drop as
  with next as (
    select id, received_at, message_id from tracking_events where ${received} order by id
      limit ${EVENTS_PER_BATCH}
  ), stop as (
    select min(id) as id from next where message_id is not null
      and received_at >= ${relayed.waitingSince(tx, accountId)}
  )
  select e.id, e.occurred_at, e.customer_external_id, e.contact_external_id, e.message_id,
    c.service_id as customer_id, t.service_id as contact_id,
    case when jsonb_typeof(e.data->'customer') = 'object' then e.data->'customer' end
      as customer_data,
    case when jsonb_typeof(e.data->'contact') = 'object' then e.data->'contact' end as contact_data
  from (select * from tracking_events
        where ${received} and id < coalesce((select id from stop), ${lastId} + 1)
        order by id limit ${EVENTS_PER_BATCH}) e
    left join lateral (select service_id from customers c where c.account_id = ${accountId}
                         and c.external_id = e.customer_external_id offset 0) c on true
    left join lateral (select service_id from contacts t where t.account_id = ${accountId}
                         and t.external_id = e.contact_external_id and t.customer_id = c.service_id
                           offset 0) t on true`
  const [range] = await tx`
    select count(*)::int as n, min(id) as first, max(id) as last,
      exists (select 1 from tracking_events where ${received}
        and id > coalesce((select max(id) from stage_events), ${below} - 1)) as waiting
    from stage_events`
  return range as Staged
}

// Events of suppressed (erased) people are dropped, not applied: deleted with their staged rows and
// counted on their suppressions; a relayed one is kept as its intake's (`relayed.dropped`).
// The staged rows are read through a materialized CTE, as in relay/tracks.ts (Citus).
const dropSuppressed = async (tx: Tx, accountId: number, range: Staged, relayed: Relayed) => {
  const [row] = await tx`
    with s as materialized (
      select id, customer_external_id, contact_external_id, message_id, occurred_at
        from stage_events
    ), gone as (
      select * from s where
        ${suppressedSql(tx, accountId, tx`s.customer_external_id`, tx`s.contact_external_id`)}
    ), unstaged as (
      delete from stage_events where id = any(array(select id from gone))
    ), removed as (
      delete from tracking_events e using gone g
      where e.account_id = ${accountId} and e.id = g.id and e.id between ${range.first}
        and ${range.last}
    ), counted
      as
        (${countDropped(tx, accountId, tx`select customer_external_id, contact_external_id from gone`)}),
    relayed as (
      ${relayed.dropped(tx, accountId, tx`select message_id, occurred_at from gone where message_id is not null`)}
    )
    select count(*)::int as n, (select count(*) from relayed)::int as relayed from gone`
  return row as { n: number; relayed: number }
}

// An unknown contact of a known customer is created under the customer of its first event
// (its name and attributes come with the update below), and its events are matched to it.
const createContacts = (tx: Tx, accountId: number) => tx`
  with created as (${createContactsSql(tx, accountId, {
    external: tx`s.contact_external_id`,
    customer: tx`s.customer_id`,
    from: tx`stage_events s`,
    where: tx`s.customer_id is not null and s.contact_external_id is not null and s.contact_id is null`,
    order: tx`s.id`,
  })}), matched as (
    update stage_events s set contact_id = c.service_id
    from created c
    where s.contact_external_id = c.external_id and s.customer_id = c.customer_id
  )
  select service_id from created`

type Level = 'customer' | 'contact'

// The key/value pairs of data.customer or data.contact.
const pairs = (tx: Tx, level: Level) =>
  tx`stage_events s cross join jsonb_each(s.${tx(`${level}_data`)}) d`

// Later events win. In the batch, the latest event per (record, key) is taken; against earlier
// batches, tracked_keys holds the event last applied to each (record, key), so an older event
// arriving late changes nothing it has set. `kv` yields (record_id, key, value, occurred_at, id,
// ...) for the values that may be applied; `update` reads the winners from `fresh`.
const applyLevel = (tx: Tx, accountId: number, level: Level, kv: Fragment, update: Fragment) => tx`
  with kv as (${kv}), latest as (
    select distinct on (record_id, key) * from kv order by record_id, key, occurred_at desc, id desc
  ), fresh as (
    select l.* from latest l
      left join tracked_keys w on w.account_id = ${accountId} and w.entity = ${level}
        and w.record_id = l.record_id
        and w.key = l.key
    where w.record_id is null or (l.occurred_at, l.id) > (w.occurred_at, w.event_id)
  ), marked as (
    insert into tracked_keys (account_id, entity, record_id, key, occurred_at, event_id)
    select ${accountId}, ${level}, record_id, key, occurred_at, id from fresh
    on conflict (account_id, entity, record_id, key) do update
      set occurred_at = excluded.occurred_at, event_id = excluded.event_id
  )
  ${update}`

// data.customer keys that are customer attributes, with values of the attribute's type
// (a wrong-typed value is ignored; null clears).
const applyTrackedCustomers = (tx: Tx, accountId: number) =>
  applyLevel(
    tx,
    accountId,
    'customer',
    tx`
  select s.customer_id as record_id, d.key, d.value, s.occurred_at, s.id
  from ${pairs(tx, 'customer')}
    join ${definitionsSql(tx, accountId)} p on p.entity = 'customer' and p.kind = 'attribute'
      and p.codename = d.key
  where s.customer_id is not null and s.customer_data is not null and fits_type(d.value, p.type)`,
    updateRecords(
      tx,
      'customers',
      accountId,
      tx`select record_id, null::text as name, jsonb_object_agg(key, value) as attributes from fresh
        group by 1`,
      tx`r.service_id = f.record_id`,
    ),
  )

// data.contact keys that are contact attributes (typed as above), and contact_name (a string of at
// most 255 characters, as in contact uploads) setting the name.
const applyTrackedContacts = (tx: Tx, accountId: number) =>
  applyLevel(
    tx,
    accountId,
    'contact',
    tx`
  select * from (
    select s.contact_id as record_id, d.key, d.value, s.occurred_at, s.id,
      d.key = 'contact_name' and jsonb_typeof(d.value) = 'string'
        and length(d.value #>> '{}') <= 255 as is_name,
      coalesce(fits_type(d.value, p.type), false) as is_attribute
    from ${pairs(tx, 'contact')}
      left join ${definitionsSql(tx, accountId)} p on p.entity = 'contact' and p.kind = 'attribute'
        and p.codename = d.key
    where s.contact_id is not null and s.contact_data is not null) x
  where is_name or is_attribute`,
    updateRecords(
      tx,
      'contacts',
      accountId,
      tx`select record_id, max(value #>> '{}') filter (where is_name) as name,
        coalesce(jsonb_object_agg(key, value) filter (where is_attribute), '{}') as attributes
      from fresh group by 1`,
      tx`r.service_id = f.record_id`,
    ),
  )

// Events of an unknown customer are kept, marked unmatched. The staged range, known when the plan
// is made, keeps the planner from reading every event of the account. With a settled check the
// cursor moves past the ids up to it that this batch read past (all of them unless the batch is
// full); a new check is noted when none is open.
const markEvents = (tx: Tx, cursor: Cursor, range: Staged, move: Move) => tx`
  with marked as (
    update tracking_events e set status = case when s.customer_id is null then 'unmatched'
      else 'applied' end,
      customer_id = s.customer_id, contact_id = s.contact_id
    from stage_events s
    where e.account_id = ${cursor.accountId} and e.id = s.id and e.id between ${range.first}
      and ${range.last}
  ), moved as (${moveCursor(tx, cursor, move)})
  select`

// One batch, with the seam `relayed` (tracking/apply.ts).
export const applyTrackerBatch = async (tx: Tx, accountId: number, relayed: Relayed) => {
  const cursor = await lockAndReadCursor(tx, TASKS.applyEvents, accountId)
  const next = await nextCheck(tx, cursor)
  const staged = await stageEvents(tx, accountId, cursor.below, cursor.last_id, relayed)
  const duplicates =
    staged.n > 0
      ? await relayed.dropDuplicates(tx, accountId, staged as { first: number; last: number })
      : 0
  const dropped =
    staged.n > 0 ? await dropSuppressed(tx, accountId, staged, relayed) : { n: 0, relayed: 0 }
  const suppressed = dropped.n
  const tracks = staged.n > 0 ? await relayed.count(tx, accountId, dropped.relayed) : 0
  const created = await createContacts(tx, accountId)
  await lockRecordsIn(tx, 'customers', accountId, tx`select customer_id from stage_events`)
  await lockRecordsIn(tx, 'contacts', accountId, tx`select contact_id from stage_events`)
  const customers = await applyTrackedCustomers(tx, accountId)
  const contacts = await applyTrackedContacts(tx, accountId)
  const below = nextBelow(cursor, staged.n === EVENTS_PER_BATCH || staged.waiting, staged.last)
  await markEvents(tx, cursor, staged, { below, next })
  // Changed attributes can change scores (fit, date attributes); new contacts get theirs.
  const contactIds = [...new Set([...created, ...contacts].map((r) => r.service_id as number))]
  await addJobs(tx, [
    ...scoreRecordsJobs(
      accountId,
      'customer',
      customers.map((r) => r.service_id as number),
    ),
    ...scoreRecordsJobs(accountId, 'contact', contactIds),
  ])
  if (customers.length > 0) await addCustomersChanged(tx, accountId)
  return {
    events: staged.n,
    // Only when rows past the batch still wait (a full batch, or one stopped short of
    // relayed events).
    ...(staged.waiting ? { waiting: true } : {}),
    // Only when some were dropped: the counts stay as they were for accounts without suppressions.
    ...(suppressed > 0 ? { suppressed } : {}),
    // The relay's tracks (the result's name is the one its tests and logs knew).
    ...(tracks > 0 || duplicates > 0
      ? { segment: { tracks, suppressed: dropped.relayed, duplicates } }
      : {}),
    customers: customers.length,
    contactsCreated: created.length,
    contacts: contacts.length,
  }
}

// The account's events, batch by batch (intake/batches.ts). A batch short of full ends the run,
// also one that stopped short of relayed events waiting for their intake's job: that job, queued by
// what they wait for, applies them after it (relay/apply.ts).
export const drainTracker = async (app: App, accountId: number, relayed: Relayed) => {
  let events = 0
  await applyBatches(
    app,
    TASKS.applyEvents,
    accountId,
    async (tx) => {
      const applied = await applyTrackerBatch(tx, accountId, relayed)
      return { ...applied, full: applied.events === EVENTS_PER_BATCH }
    },
    (applied) => {
      events += applied.events
      if (applied.segment) relayed.counted(applied.segment)
    },
  )
  return { events }
}

// The job: past the intake's gate (intake/gate.ts), then the account's events.
export const trackerJob = async (
  app: App,
  { account_id: accountId }: AccountPayload,
  relayed: Relayed,
) => {
  await passGate(app, TASKS.applyEvents, accountId)
  return drainTracker(app, accountId, relayed)
}
