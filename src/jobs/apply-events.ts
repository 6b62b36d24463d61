import type { Task } from 'graphile-worker'
import { addJobs, accountQueue, type JobSpec } from './enqueue.ts'
import type { App } from '../http/types.ts'
import type { Tx } from '../db/client.ts'

export interface ApplyEventsPayload { account_id: number; from_id: number; to_id: number }

// The scoring task's payload contract; on the account's queue, so it runs after this job.
export const scoreJobs = (accountId: number, entity: 'customer' | 'contact', ids: number[]): JobSpec[] =>
  ids.length ? [{ task: 'score_records', payload: { account_id: accountId, entity, ids }, queue: accountQueue(accountId) }] : []

// Applies the tracked events of one insert (ids from_id..to_id; concurrent inserts may interleave
// ids, so the range can hold other requests' events too: whichever job comes first applies them,
// the other finds them no longer 'received'). All set-based, in one transaction; a second run of
// the same job finds nothing to do. The tracker updates and creates contacts but never creates a
// customer, and never sends a webhook.

// The events still to apply, matched to their customers by external id.
const stageEvents = (tx: Tx, accountId: number, fromId: number, toId: number) => tx`
  create temp table stage_events on commit drop as
  select e.id, e.occurred_at, e.customer_external_id, e.contact_external_id, e.data,
    c.service_id as customer_id, null::bigint as contact_id
  from tracking_events e
    left join customers c on c.account_id = e.account_id and c.external_id = e.customer_external_id
  where e.account_id = ${accountId} and e.id between ${fromId} and ${toId} and e.status = 'received'`

// An unknown contact of a known customer is created under the customer of its first event
// (its name and attributes come with the update below).
const createContacts = (tx: Tx, accountId: number) => tx`
  insert into contacts (account_id, external_id, customer_id)
  select distinct on (s.contact_external_id) ${accountId}, s.contact_external_id, s.customer_id
  from stage_events s
  where s.customer_id is not null and s.contact_external_id is not null
    and not exists (select 1 from contacts t where t.account_id = ${accountId} and t.external_id = s.contact_external_id)
  order by s.contact_external_id, s.id
  on conflict (account_id, external_id) do nothing
  returning service_id`

// A contact id that belongs to another customer is neither moved nor updated by the tracker.
const matchContacts = (tx: Tx, accountId: number) => tx`
  update stage_events s set contact_id = t.service_id
  from contacts t
  where t.account_id = ${accountId} and t.external_id = s.contact_external_id and t.customer_id = s.customer_id`

// Later events win: values are folded in (occurred_at, id) order, and a key that an already
// applied event with a later timestamp has set is skipped, so a late-arriving older event cannot
// overwrite newer data.
const supersededBy = (tx: Tx, accountId: number, level: 'customer' | 'contact') => tx`
  not exists (
    select 1 from tracking_events t
    where t.account_id = ${accountId} and t.customer_external_id = s.customer_external_id
      ${level === 'contact' ? tx`and t.contact_external_id = s.contact_external_id` : tx``}
      and t.status = 'applied' and (t.occurred_at, t.id) > (s.occurred_at, s.id)
      and t.data->${level} ? d.key)`

// data.customer keys that are customer attributes, with values of the attribute's type.
const updateCustomers = (tx: Tx, accountId: number) => tx`
  with kv as (
    select s.customer_id, d.key, d.value, s.occurred_at, s.id
    from stage_events s
      cross join jsonb_each(s.data->'customer') d
      join property_defs p on p.account_id = ${accountId} and p.entity = 'customer' and p.kind = 'attribute' and p.codename = d.key
    where s.customer_id is not null and fits_type(d.value, p.type) and ${supersededBy(tx, accountId, 'customer')}
  ), latest as (
    select customer_id, jsonb_object_agg(key, value order by occurred_at, id) as attributes from kv group by 1
  )
  update customers c set attributes = jsonb_strip_nulls(c.attributes || l.attributes), updated_at = now()
  from latest l
  where c.account_id = ${accountId} and c.service_id = l.customer_id
  returning c.service_id`

// data.contact keys that are contact attributes (typed as above), and contact_name (a string of
// at most 255 characters, as in contact uploads) setting the name.
const updateContacts = (tx: Tx, accountId: number) => tx`
  with kv as (
    select s.contact_id, d.key, d.value, s.occurred_at, s.id,
      d.key = 'contact_name' and jsonb_typeof(d.value) = 'string' and length(d.value #>> '{}') <= 255 as is_name,
      coalesce(fits_type(d.value, p.type), false) as is_attribute
    from stage_events s
      cross join jsonb_each(s.data->'contact') d
      left join property_defs p on p.account_id = ${accountId} and p.entity = 'contact' and p.kind = 'attribute' and p.codename = d.key
    where s.contact_id is not null and ${supersededBy(tx, accountId, 'contact')}
  ), latest as (
    select contact_id,
      (array_agg(value #>> '{}' order by occurred_at desc, id desc) filter (where is_name))[1] as name,
      jsonb_object_agg(key, value order by occurred_at, id) filter (where is_attribute) as attributes
    from kv where is_name or is_attribute group by 1
  )
  update contacts t set name = coalesce(l.name, t.name),
    attributes = jsonb_strip_nulls(t.attributes || coalesce(l.attributes, '{}')), updated_at = now()
  from latest l
  where t.account_id = ${accountId} and t.service_id = l.contact_id
  returning t.service_id`

// Events of an unknown customer are kept, marked unmatched.
const markEvents = (tx: Tx, accountId: number) => tx`
  update tracking_events e set status = case when s.customer_id is null then 'unmatched' else 'applied' end,
    customer_id = s.customer_id, contact_id = s.contact_id
  from stage_events s
  where e.account_id = ${accountId} and e.id = s.id`

export const applyEvents = async (tx: Tx, p: ApplyEventsPayload) => {
  await stageEvents(tx, p.account_id, p.from_id, p.to_id)
  const created = await createContacts(tx, p.account_id)
  await matchContacts(tx, p.account_id)
  const customers = await updateCustomers(tx, p.account_id)
  const contacts = await updateContacts(tx, p.account_id)
  const marked = await markEvents(tx, p.account_id)
  // Changed attributes can change scores (fit, date attributes); new contacts get theirs.
  const contactIds = [...new Set([...created, ...contacts].map((r) => r.service_id as number))]
  await addJobs(tx, [
    ...scoreJobs(p.account_id, 'customer', customers.map((r) => r.service_id as number)),
    ...scoreJobs(p.account_id, 'contact', contactIds),
  ])
  return { events: marked.count, customers: customers.length, contactsCreated: created.length, contacts: contacts.length }
}

export const applyEventsTask = (app: App): Task => async (payload) => {
  await app.sql.begin((tx) => applyEvents(tx, payload as ApplyEventsPayload))
}
