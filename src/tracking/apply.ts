import type { App } from '../context.ts'
import { definitionsSql } from '../catalog/properties.ts'
import type { Tx } from '../db/client.ts'
import { PLANNER, setLocal } from '../db/planner.ts'
import { type AccountPayload, addCustomersChanged, addJobs, applyJob, scoreRecordsJobs, TASKS } from '../db/jobs.ts'
import { lockRecordsIn, xactLock } from '../db/locks.ts'
import { passGate } from './intake.ts'
import { lockAndReadCursor, type Move, moveCursor, nextBelow, nextCheck } from './cursor.ts'
import { createContactsSql } from './contacts.ts'
import { countDropped, suppressedSql } from './suppressions.ts'
import { countedRelayTracks, countRelayTracks, droppedRelayTracks, dropDuplicateTracks } from './relay-tracks.ts'

// At most this many events per transaction.
export const EVENTS_PER_BATCH = 5000

// A job applies every event of its account still 'received', in batches, in id order. The intake
// adds the job only when the account has none waiting (tracking/intake.ts), so under load one job
// takes many requests' events. All set-based; a second run finds nothing to do. The tracker
// updates and creates contacts but never creates a customer, and never sends a webhook.

// The account's queue should already run its jobs one at a time, but graphile-worker 0.17 with a
// localQueue hands several jobs of one named queue to workers at once (graphile/worker#621): two
// batches of one account would then stage the same events and deadlock on the same records.
const accountLock = (tx: Tx, accountId: number) => xactLock(tx, `apply_events:${accountId}`)

// The events to apply, matched to their customers by external id and to the contacts those
// customers already have (a contact id that belongs to another customer is neither moved nor
// updated by the tracker), with data.customer and data.contact when they are objects (null is no
// data). Ids past the sequence's last id at the batch's start wait for the next batch: their
// inserts began after this job was taken, so they have added the next job. Returns the range of
// ids staged, which bounds the events' update, and whether events up to that last id still wait.
// Each event finds its customer and contact through their unique indexes (OFFSET 0 keeps each lookup a
// subquery of its own): planned as joins while the new events were missing from the statistics, every
// event read all the account's customers (1 s a batch at 1,000 customers; docs/benchmarks.md).
// Segment tracks (message_id, relay.ts) come after the Segment messages received before them or
// with them (a group that creates their customer): the batch stops short of the first one received
// no sooner than the oldest message the Segment apply job has still to apply, and what it stopped
// short of waits (`waiting`) for a later job.
interface Staged {
  n: number
  first: number | null
  last: number | null
  waiting: boolean
}
const relayWaitingSince = (tx: Tx, accountId: number) => tx`(
  select min(received_at) from segment_messages where account_id = ${accountId} and status = 'received'
    and id >= coalesce((select applied_below from segment_cursors where account_id = ${accountId}), 0))`
const stageEvents = async (tx: Tx, accountId: number, below: number, lastId: number) => {
  await setLocal(tx, PLANNER.freshEvents)
  const received = tx`account_id = ${accountId} and id between ${below} and ${lastId} and status = 'received'`
  await tx`
  create temp table stage_events on commit drop as
  with next as (
    select id, received_at, message_id from tracking_events where ${received} order by id limit ${EVENTS_PER_BATCH}
  ), stop as (
    select min(id) as id from next where message_id is not null
      and received_at >= ${relayWaitingSince(tx, accountId)}
  )
  select e.id, e.occurred_at, e.customer_external_id, e.contact_external_id, e.message_id,
    c.service_id as customer_id, t.service_id as contact_id,
    case when jsonb_typeof(e.data->'customer') = 'object' then e.data->'customer' end as customer_data,
    case when jsonb_typeof(e.data->'contact') = 'object' then e.data->'contact' end as contact_data
  from (select * from tracking_events
        where ${received} and id < coalesce((select id from stop), ${lastId} + 1)
        order by id limit ${EVENTS_PER_BATCH}) e
    left join lateral (select service_id from customers c where c.account_id = ${accountId}
                         and c.external_id = e.customer_external_id offset 0) c on true
    left join lateral (select service_id from contacts t where t.account_id = ${accountId}
                         and t.external_id = e.contact_external_id and t.customer_id = c.service_id offset 0) t on true`
  const [range] = await tx`
    select count(*)::int as n, min(id) as first, max(id) as last,
      exists (select 1 from tracking_events where ${received}
        and id > coalesce((select max(id) from stage_events), ${below} - 1)) as waiting
    from stage_events`
  return range as Staged
}

// Events of suppressed (erased) people are dropped, not applied: deleted with their staged rows and
// counted on their suppressions. A Segment track dropped so becomes a dropped Segment message
// (relay-tracks.ts), which keeps its messageId and names nobody.
// The staged rows are read through a materialized CTE, as in relay-tracks.ts (Citus).
const dropSuppressed = async (tx: Tx, accountId: number, range: Staged) => {
  const [row] = await tx`
    with s as materialized (
      select id, customer_external_id, contact_external_id, message_id, occurred_at from stage_events
    ), gone as (
      select * from s where ${suppressedSql(tx, accountId, tx`s.customer_external_id`, tx`s.contact_external_id`)}
    ), unstaged as (
      delete from stage_events where id = any(array(select id from gone))
    ), removed as (
      delete from tracking_events e using gone g
      where e.account_id = ${accountId} and e.id = g.id and e.id between ${range.first} and ${range.last}
    ), counted as (${countDropped(tx, accountId, tx`select customer_external_id, contact_external_id from gone`)}),
    segment as (
      ${droppedRelayTracks(tx, accountId, tx`select message_id, occurred_at from gone where message_id is not null`)}
    )
    select count(*)::int as n, (select count(*) from segment)::int as segment from gone`
  return row as { n: number; segment: number }
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
const pairs = (tx: Tx, level: Level) => tx`stage_events s cross join jsonb_each(s.${tx(`${level}_data`)}) d`

// Later events win. In the batch, the latest event per (record, key) is taken; against earlier
// batches, tracked_keys holds the event last applied to each (record, key), so an older event
// arriving late changes nothing it has set. `kv` yields (record_id, key, value, occurred_at, id, ...)
// for the values that may be applied; `update` reads the winners from `fresh`.
const applyLevel = (tx: Tx, accountId: number, level: Level, kv: ReturnType<Tx>, update: ReturnType<Tx>) => tx`
  with kv as (${kv}), latest as (
    select distinct on (record_id, key) * from kv order by record_id, key, occurred_at desc, id desc
  ), fresh as (
    select l.* from latest l
      left join tracked_keys w on w.account_id = ${accountId} and w.entity = ${level} and w.record_id = l.record_id
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
    join ${definitionsSql(tx, accountId)} p on p.entity = 'customer' and p.kind = 'attribute' and p.codename = d.key
  where s.customer_id is not null and s.customer_data is not null and fits_type(d.value, p.type)`,
    tx`
  update customers c set attributes = jsonb_strip_nulls(c.attributes || f.attributes), updated_at = now()
  from (select record_id, jsonb_object_agg(key, value) as attributes from fresh group by 1) f
  where c.account_id = ${accountId} and c.service_id = f.record_id
  returning c.service_id`,
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
      d.key = 'contact_name' and jsonb_typeof(d.value) = 'string' and length(d.value #>> '{}') <= 255 as is_name,
      coalesce(fits_type(d.value, p.type), false) as is_attribute
    from ${pairs(tx, 'contact')}
      left join ${definitionsSql(tx, accountId)} p on p.entity = 'contact' and p.kind = 'attribute'
        and p.codename = d.key
    where s.contact_id is not null and s.contact_data is not null) x
  where is_name or is_attribute`,
    tx`
  update contacts t set name = coalesce(f.name, t.name),
    attributes = jsonb_strip_nulls(t.attributes || f.attributes), updated_at = now()
  from (select record_id, max(value #>> '{}') filter (where is_name) as name,
          coalesce(jsonb_object_agg(key, value) filter (where is_attribute), '{}') as attributes
        from fresh group by 1) f
  where t.account_id = ${accountId} and t.service_id = f.record_id
  returning t.service_id`,
  )

// Events of an unknown customer are kept, marked unmatched. The staged range, known when the plan
// is made, keeps the planner from reading every event of the account. With a settled check the
// cursor moves past the ids up to it that this batch read past (all of them unless the batch is
// full); a new check is noted when none is open.
const markEvents = (tx: Tx, accountId: number, range: Staged, move: Move) => tx`
  with marked as (
    update tracking_events e set status = case when s.customer_id is null then 'unmatched' else 'applied' end,
      customer_id = s.customer_id, contact_id = s.contact_id
    from stage_events s
    where e.account_id = ${accountId} and e.id = s.id and e.id between ${range.first} and ${range.last}
  ), moved as (${moveCursor(tx, 'tracking_cursors', accountId, move)})
  select`

export const applyEvents = async (tx: Tx, accountId: number) => {
  const cursor = await lockAndReadCursor(
    tx,
    accountId,
    accountLock(tx, accountId),
    'tracking_events',
    'tracking_cursors',
  )
  const next = await nextCheck(tx, cursor, 'tracking_events')
  const staged = await stageEvents(tx, accountId, cursor.below, cursor.last_id)
  const duplicates =
    staged.n > 0 ? await dropDuplicateTracks(tx, accountId, staged as { first: number; last: number }) : 0
  const dropped = staged.n > 0 ? await dropSuppressed(tx, accountId, staged) : { n: 0, segment: 0 }
  const suppressed = dropped.n
  const relayTracks = staged.n > 0 ? await countRelayTracks(tx, accountId, dropped.segment) : 0
  const created = await createContacts(tx, accountId)
  await lockRecordsIn(tx, 'customers', accountId, tx`select customer_id from stage_events`)
  await lockRecordsIn(tx, 'contacts', accountId, tx`select contact_id from stage_events`)
  const customers = await applyTrackedCustomers(tx, accountId)
  const contacts = await applyTrackedContacts(tx, accountId)
  const below = nextBelow(cursor, staged.n === EVENTS_PER_BATCH || staged.waiting, staged.last)
  await markEvents(tx, accountId, staged, { below, next })
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
    // Only when rows past the batch still wait (a full batch, or one stopped short of Segment tracks).
    ...(staged.waiting ? { waiting: true } : {}),
    // Only when some were dropped: the counts stay as they were for accounts without suppressions.
    ...(suppressed > 0 ? { suppressed } : {}),
    ...(relayTracks > 0 || duplicates > 0
      ? { segment: { tracks: relayTracks, suppressed: dropped.segment, duplicates } }
      : {}),
    customers: customers.length,
    contactsCreated: created.length,
    contacts: contacts.length,
  }
}

// The account's queue runs one job at a time, so a job draining a large backlog of events would
// hold every upload of the account behind it (docs/benchmarks.md). A job applies this many batches
// at most, then queues its successor behind them.
export const BATCHES_PER_JOB = 4

// One transaction per batch; the successor is added in the last one's. A batch short of full ends the
// run, also one that stopped short of Segment tracks waiting for the Segment apply job: that job, queued
// by the messages they wait for, applies them after those (relay-apply.ts). The Segment tracks'
// counters count what committed.
export const drainEvents = async (app: App, accountId: number) => {
  let events = 0
  for (let batch = 1; ; batch++) {
    const { more, segment } = await app.sql.begin(async (tx) => {
      const applied = await applyEvents(tx, accountId)
      events += applied.events
      const done = { segment: applied.segment, more: false }
      if (applied.events < EVENTS_PER_BATCH) return done
      if (batch < BATCHES_PER_JOB) return { ...done, more: true }
      await addJobs(tx, [applyJob(TASKS.applyEvents, accountId)])
      return done
    })
    if (segment) countedRelayTracks(segment)
    if (!more) return { events }
  }
}

// The job: past the intake's gate (intake.ts), then the account's events.
export const applyEventsOfAccount = async (app: App, { account_id: accountId }: AccountPayload) => {
  await passGate(app, TASKS.applyEvents, accountId)
  return drainEvents(app, accountId)
}
