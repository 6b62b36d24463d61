import type { App } from '../context.ts'
import type { Tx } from '../db/client.ts'
import { type AccountPayload, addJobs, applyEventsJob, scoreRecordsJobs } from '../db/jobs.ts'
import { lockRecordsIn } from '../db/locks.ts'

// At most this many events per transaction.
export const BATCH = 5000

// A job applies every event of its account still 'received', in batches, in id order. The intake
// adds the job only when the account has none waiting (tracking/intake.ts), so under load one job
// takes many requests' events. All set-based; a second run finds nothing to do. The tracker
// updates and creates contacts but never creates a customer, and never sends a webhook.

// The events to apply, matched to their customers by external id.
const stageEvents = async (tx: Tx, accountId: number) => {
  await tx`
    create temp table stage_events on commit drop as
    select e.id, e.occurred_at, e.customer_external_id, e.contact_external_id, e.data,
      c.service_id as customer_id, null::bigint as contact_id
    from (select * from tracking_events
          where account_id = ${accountId} and status = 'received'
          order by id limit ${BATCH}) e
      left join customers c on c.account_id = ${accountId} and c.external_id = e.customer_external_id`
  // Without statistics the planner takes the staged rows for hundreds and scans tracking_events.
  await tx`analyze stage_events`
}

// An unknown contact of a known customer is created under the customer of its first event
// (its name and attributes come with the update below).
const createContacts = (tx: Tx, accountId: number) => tx`
  insert into contacts (account_id, external_id, customer_id)
  select distinct on (s.contact_external_id) ${accountId}, s.contact_external_id, s.customer_id
  from stage_events s
  where s.customer_id is not null and s.contact_external_id is not null
    and not exists (select 1 from contacts t where t.account_id = ${accountId}
      and t.external_id = s.contact_external_id)
  order by s.contact_external_id, s.id
  on conflict (account_id, external_id) do nothing
  returning service_id`

// A contact id that belongs to another customer is neither moved nor updated by the tracker.
const matchContacts = (tx: Tx, accountId: number) => tx`
  update stage_events s set contact_id = t.service_id
  from contacts t
  where t.account_id = ${accountId} and t.external_id = s.contact_external_id and t.customer_id = s.customer_id`

type Level = 'customer' | 'contact'

// The key/value pairs of data.customer or data.contact (only objects; null is no data).
const pairs = (tx: Tx, level: Level) => tx`
  stage_events s cross join jsonb_each(case when jsonb_typeof(s.data->${level}::text) = 'object'
    then s.data->${level}::text end) d`

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
const updateCustomers = (tx: Tx, accountId: number) =>
  applyLevel(
    tx,
    accountId,
    'customer',
    tx`
  select s.customer_id as record_id, d.key, d.value, s.occurred_at, s.id
  from ${pairs(tx, 'customer')}
    join property_defs p on p.account_id = ${accountId} and p.entity = 'customer' and p.kind = 'attribute'
      and p.codename = d.key
  where s.customer_id is not null and fits_type(d.value, p.type)`,
    tx`
  update customers c set attributes = jsonb_strip_nulls(c.attributes || f.attributes), updated_at = now()
  from (select record_id, jsonb_object_agg(key, value) as attributes from fresh group by 1) f
  where c.account_id = ${accountId} and c.service_id = f.record_id
  returning c.service_id`,
  )

// data.contact keys that are contact attributes (typed as above), and contact_name (a string of at
// most 255 characters, as in contact uploads) setting the name.
const updateContacts = (tx: Tx, accountId: number) =>
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
      left join property_defs p on p.account_id = ${accountId} and p.entity = 'contact' and p.kind = 'attribute'
        and p.codename = d.key
    where s.contact_id is not null) x
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

// Events of an unknown customer are kept, marked unmatched.
// The id bounds keep the planner from reading every event of the account.
const markEvents = (tx: Tx, accountId: number) => tx`
  update tracking_events e set status = case when s.customer_id is null then 'unmatched' else 'applied' end,
    customer_id = s.customer_id, contact_id = s.contact_id
  from stage_events s
  where e.account_id = ${accountId} and e.id = s.id
    and e.id between (select min(id) from stage_events) and (select max(id) from stage_events)`

// The account's queue should already run its jobs one at a time, but graphile-worker 0.17 with a
// localQueue hands several jobs of one named queue to workers at once (graphile/worker#621): two
// batches of one account would then stage the same events and deadlock on the same records.
const lockAccount = (tx: Tx, accountId: number) =>
  tx`select pg_advisory_xact_lock(hashtextextended('apply_events:' || ${accountId}::text, 0))`

export const applyEvents = async (tx: Tx, accountId: number) => {
  await lockAccount(tx, accountId)
  await stageEvents(tx, accountId)
  const created = await createContacts(tx, accountId)
  await matchContacts(tx, accountId)
  await lockRecordsIn(tx, 'customers', accountId, tx`select customer_id from stage_events`)
  await lockRecordsIn(tx, 'contacts', accountId, tx`select contact_id from stage_events`)
  const customers = await updateCustomers(tx, accountId)
  const contacts = await updateContacts(tx, accountId)
  const marked = await markEvents(tx, accountId)
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
  return {
    events: marked.count,
    customers: customers.length,
    contactsCreated: created.length,
    contacts: contacts.length,
  }
}

// The account's queue runs one job at a time, so a job draining a large backlog of events would
// hold every upload of the account behind it (measured in bench/soak: 30 s jobs, uploads waiting
// over a minute). A job applies this many batches at most, then queues its successor behind them.
export const BATCHES_PER_JOB = 4

// One transaction per batch; the successor is added in the last one's.
export const applyEventsOfAccount = async (app: App, { account_id: accountId }: AccountPayload) => {
  let events = 0
  for (let batch = 1; ; batch++) {
    const more = await app.sql.begin(async (tx) => {
      const applied = (await applyEvents(tx, accountId)).events
      events += applied
      if (applied < BATCH) return false
      if (batch < BATCHES_PER_JOB) return true
      await addJobs(tx, [applyEventsJob(accountId)])
      return false
    })
    if (!more) return { events }
  }
}
