import type { PendingQuery, Row } from 'postgres'
import type { App } from '../../context.ts'
import { definitionsSql } from '../../catalog/properties.ts'
import type { Tx } from '../../db/client.ts'
import {
  type AccountPayload,
  addCustomersChanged,
  addJobs,
  scoreRecordsJobs,
  TASKS,
} from '../../db/jobs.ts'
import { lockRecordsNamed } from '../../db/locks.ts'
import { PLANNER, setLocal } from '../../db/planner.ts'
import { sqlCut } from '../../validate.ts'
import { drainEvents } from '../apply.ts'
import { applyBatches } from '../intake/batches.ts'
import { passGate } from '../intake/gate.ts'
import { lockAndReadCursor, moveCursor, nextBelow, nextCheck } from '../intake/cursor.ts'
import { createContactsSql, updateRecords } from '../intake/records.ts'
import { countDropped, suppressedSql } from '../suppressions.ts'
import { relayApplied, relayDropped, relayReceived } from './metrics.ts'
import { dropLaterTwins } from './twins.ts'

// The apply job of the relay's messages (relay/intake.ts stores them): one account's messages
// in id order, in batches, each batch one transaction, set-based. Within a batch the groups go
// first (customers, and the contacts they name), then the identifies (contacts), then the tracks
// (tracked events, stored matched as the tracker's apply job matches its own, and counted like any
// other). Later messages win, in the order received. docs/api.md ("Segment-compatible ingest") is
// the mapping this implements.

export const MESSAGES_PER_BATCH = 5000
// An identify of an unknown contact of no known customer waits (status pending) for a group naming
// its user, at most PENDING_MAX an account and PENDING_HOURS long; then it is dropped, counted.
export const PENDING_MAX = 10_000
export const PENDING_HOURS = 24
// Messages done are kept this long: the window within which a messageId deduplicates.
export const KEEP_DAYS = 7
// Dropped trait keys are counted by name (cut as validate.ts cuts names) for at most this many
// distinct names an account.
export const MAX_KEY_NAMES = 200

// The columns of segment_messages that a batch stages, the received messages and the pending ones.
const MESSAGE_COLUMNS = [
  'id',
  'message_id',
  'type',
  'user_id',
  'group_id',
  'event',
  'occurred_at',
  'traits',
  'properties',
  'received_at',
]

// The batch: the next messages received, read from the account's cursor (intake/cursor.ts)
// through the primary key, and the pending identifies of the users they name that may now be
// placed: by a group, by an identify with context.groupId, as a contact known by now, or with
// a groupId of their own (whose customer may exist by now). Restaging every pending identify
// of each user named (an identify of a user still unknown places nobody) rewrote the whole
// pending backlog every batch (docs/benchmarks.md). `status` is the outcome, null until decided.
// A statement that probes distributed tables row by row of stage_seg (or stage_traits) reads
// those rows through a materialized CTE (`s`): Citus refuses a subquery on a distributed table
// correlated to a coordinator table, but not to a CTE's result, which it sends to the shard's
// node with the statement.
const stage = async (tx: Tx, accountId: number, below: number) => {
  await tx`
    create temp table stage_seg on commit drop as
    select ${tx(MESSAGE_COLUMNS)}, reason, detail,
      false as was_pending, case when reason is not null then 'dropped' end as status
    from segment_messages where account_id = ${accountId} and id >= ${below} and status = 'received'
    order by id limit ${MESSAGES_PER_BATCH}`
  await tx`
    with s as materialized (
      select type, user_id, group_id from stage_seg where status is null
        and type in ('group', 'identify')
    )
    insert into stage_seg
    select ${tx(MESSAGE_COLUMNS)}, null, null, true, null
    from segment_messages where account_id = ${accountId} and status = 'pending'
      and user_id = any(array(
      select distinct s.user_id from s
      where (s.type = 'group' or s.group_id is not null
        or exists (select 1 from contacts t where t.account_id = ${accountId}
          and t.external_id = s.user_id)
        or exists (select 1 from segment_messages p where p.account_id = ${accountId}
          and p.status = 'pending'
                     and p.user_id = s.user_id and p.group_id is not null))))`
  const [batch] =
    await tx`select count(*)::int as staged, max(id) as last from stage_seg where not was_pending`
  return batch as { staged: number; last: number | null }
}

// A messageId received both as a track stored as its tracked event and as another message
// (intake.ts deduplicates each table on its own) is the one received first (the track on a
// tie): the other goes, as if never received, counted a duplicate. tracks.ts drops the track
// the same way (twins.ts).
const dropDuplicates = async (tx: Tx, accountId: number) => {
  const n = await dropLaterTwins(tx, accountId, {
    staged: 'stage_seg',
    probed: tx`not was_pending`,
    stored: 'segment_messages',
    other: 'tracking_events',
    tieLoses: true,
    within: tx``,
  })
  // A temporary table has no statistics until analyzed: without them each join below
  // was planned blind.
  await tx`analyze stage_seg`
  return n
}

// THE place where a staged message is admitted or refused before anything is written for it: every
// record and event a Segment message creates or changes comes from a message this leaves undecided.
// An account whose records another source of truth owns (FILE, an integration) gets
// nothing written.
const admit = async (tx: Tx, accountId: number) => {
  await tx`
    update stage_seg s set status = 'dropped', reason = 'source_of_truth'
    from accounts a
    where a.id = ${accountId} and a.source_of_truth <> 'API' and s.status is null
      and s.type in ('group', 'identify', 'track')`
  await tx`update stage_seg set status = 'ignored' where status is null
    and type in ('page', 'screen', 'alias')`
  // A message naming an erased customer (groupId) or contact (userId) is dropped whole and counted
  // on its suppression, so an SDK that still sends it does not bring the person back.
  await tx`
    with s as materialized (
      select id, group_id, user_id from stage_seg where status is null
        and type in ('group', 'identify', 'track')
    ), gone as (
      select * from s where ${suppressedSql(tx, accountId, tx`s.group_id`, tx`s.user_id`)}
    ), dropped as (
      update stage_seg set status = 'dropped', reason = 'suppressed'
        where id = any(array(select id from gone))
    ) ${countDropped(tx, accountId, tx`select group_id, user_id from gone`)}`
}

// Each trait of an admitted group (customer) or identify (contact): `name` (a text of 1 to 255
// characters), an attribute (a codename of the entity, custom or system, with a value of its type
// by the one value rule), invalid (its type is wrong), or dropped (no such attribute).
const classifyTraits = (tx: Tx, accountId: number) => tx`
  create temp table stage_traits on commit drop as
  select s.id, s.type, x.entity, d.key, d.value,
    case
      when d.key = 'name' then
        case when jsonb_typeof(d.value) = 'string' and length(d.value #>> '{}') between 1 and 255
          then 'name' else 'invalid' end
      when p.codename is null then 'dropped'
      when fits_type(d.value, p.type) then 'attribute'
      else 'invalid'
    end as kind,
    case when d.key = 'name' then 'text of 1 to 255 characters'
      when p.type = 'date' then 'YYYY-MM-DD'
      else p.type end as expected
  from stage_seg s
    cross join lateral (select case when s.type = 'group' then 'customer' else 'contact' end
      as entity) x
    cross join jsonb_each(case when jsonb_typeof(s.traits) = 'object' then s.traits end) d
    left join ${definitionsSql(tx, accountId)} p on p.entity = x.entity and p.kind = 'attribute'
      and p.codename = d.key
  where s.status is null and s.type in ('group', 'identify')`

// The latest value of each name and attribute trait per record (by external id), folded.
const latestTraits = (
  tx: Tx,
  entity: 'customer' | 'contact',
  idColumn: 'group_id' | 'user_id',
) => tx`
  select ext, max(value #>> '{}') filter (where kind = 'name') as name,
    coalesce(jsonb_object_agg(key, value) filter (where kind = 'attribute'), '{}') as attributes
  from (
    select distinct on (s.${tx(idColumn)}, t.key) s.${tx(idColumn)} as ext, t.key, t.value, t.kind
    from stage_traits t join stage_seg s on s.id = t.id
    where t.entity = ${entity} and t.kind in ('name', 'attribute') and s.status is null
    order by s.${tx(idColumn)}, t.key, s.id desc
  ) latest
  group by ext`

// The record `r` the latest traits `f` name (by external id), if they change its name or
// attributes. SDKs send the same traits with every group and identify: one that changes nothing
// writes nothing, so it rescores nothing either.
const changed = (
  tx: Tx,
) => tx`r.external_id = f.ext and (r.name is distinct from coalesce(f.name, r.name)
  or r.attributes is distinct from jsonb_strip_nulls(r.attributes || f.attributes))`

// Groups: the customers, created when missing, then named and given their attributes.
const applyGroups = async (tx: Tx, accountId: number) => {
  const created = await tx`
    insert into customers (account_id, external_id)
    select distinct ${accountId}::bigint, group_id from stage_seg where status is null
      and type = 'group'
    on conflict (account_id, external_id) do nothing
    returning service_id`
  await lockRecordsNamed(
    tx,
    'customers',
    accountId,
    tx`select group_id from stage_seg where status is null and type = 'group'`,
  )
  const updated = await updateRecords(
    tx,
    'customers',
    accountId,
    latestTraits(tx, 'customer', 'group_id'),
    changed(tx),
  )
  return [...created, ...updated].map((r) => r.service_id as number)
}

// The user each admitted group names belongs to its customer (the latest group): a contact
// is created under it when missing; an identify of an unknown contact whose context.groupId
// names a known customer creates it there. Identifies of users still unknown wait (pending),
// within PENDING_MAX.
const createContacts = (
  tx: Tx,
  accountId: number,
  where: PendingQuery<Row[]>,
  order: PendingQuery<Row[]>,
) =>
  createContactsSql(tx, accountId, {
    external: tx`s.user_id`,
    customer: tx`c.service_id`,
    from: tx`stage_seg s join customers c on c.account_id = ${accountId}
      and c.external_id = s.group_id`,
    where,
    order,
  })

const parkIdentifies = (tx: Tx, accountId: number) => tx`
  with s as materialized (
    select id, user_id from stage_seg where status is null and type = 'identify'
  ), all_staged as materialized (
    select id from stage_seg
  ), waiting as (
    select s.id, row_number() over (order by s.id) + (
      select count(*) from segment_messages m where m.account_id = ${accountId}
        and m.status = 'pending'
        and not exists (select 1 from all_staged p where p.id = m.id)) as place
    from s
    where not exists (select 1 from contacts t where t.account_id = ${accountId}
      and t.external_id = s.user_id)
  )
  update stage_seg s set status = case when w.place <= ${PENDING_MAX} then 'pending'
    else 'dropped' end,
    reason = case when w.place <= ${PENDING_MAX} then null else 'pending_full' end
  from waiting w where s.id = w.id`

// An identify of an unknown contact without a known customer of its own, whose user a Segment track
// received with it or after it names under a known customer (a tracked event: intake.ts), is placed
// under that customer: the track, applied after it by the tracker's apply job (tracker/apply.ts),
// would create the contact there anyway, nameless, while the identify waited. So no message
// of a batch applies before a message sent earlier in it. The identifies to place are set aside
// first (`unplaced`, over the staged rows' materialized CTE for Citus, as stage() says), then each
// probes the events' contact index (sql/044) behind OFFSET 0. Joined to the account's messages
// for their time received, planned with the messageId index (whose predicate `message_id is not
// null` matches) from statistics taken before the tracks came, or filtered beside the probe, a
// batch took up to 21 s (docs/benchmarks.md).
const placeByLaterTracks = (tx: Tx, accountId: number) => tx`
  with s as materialized (
    select id, user_id, group_id, received_at from stage_seg
    where status is null and type = 'identify'
  ), unplaced as materialized (
    select s.id, s.user_id, s.received_at from s
    where not exists (select 1 from customers c where c.account_id = ${accountId}
      and c.external_id = s.group_id)
      and not exists (select 1 from contacts t where t.account_id = ${accountId}
        and t.external_id = s.user_id)
  ), placed as (
    select u.id, (
      select e.customer_external_id from (
        select e.id, e.customer_external_id, e.message_id from tracking_events e
        where e.account_id = ${accountId} and e.contact_external_id = u.user_id
          and e.status = 'received' and e.received_at >= u.received_at
        offset 0) e
      where e.message_id is not null
        and exists (select 1 from customers c where c.account_id = ${accountId}
          and c.external_id = e.customer_external_id)
      order by e.id limit 1) as group_id
    from unplaced u
  )
  update stage_seg s set group_id = p.group_id from placed p where s.id = p.id
    and p.group_id is not null`

const applyContacts = async (tx: Tx, accountId: number) => {
  await placeByLaterTracks(tx, accountId)
  const created = await createContacts(
    tx,
    accountId,
    tx`s.status is null and s.type in ('group', 'identify') and s.user_id is not null`,
    tx`(s.type = 'group') desc, s.id desc`,
  )
  await parkIdentifies(tx, accountId)
  await lockRecordsNamed(
    tx,
    'contacts',
    accountId,
    tx`select user_id from stage_seg where status is null and type in ('group', 'identify')`,
  )
  const moved = await tx`
    update contacts t set customer_id = c.service_id, updated_at = now()
    from (select distinct on (user_id) user_id, group_id from stage_seg
          where status is null and type = 'group' and user_id is not null
            order by user_id, id desc) g
      join customers c on c.account_id = ${accountId} and c.external_id = g.group_id
    where t.account_id = ${accountId} and t.external_id = g.user_id
      and t.customer_id <> c.service_id
    returning t.service_id`
  const updated = await updateRecords(
    tx,
    'contacts',
    accountId,
    latestTraits(tx, 'contact', 'user_id'),
    changed(tx),
  )
  return [...created, ...moved, ...updated].map((r) => r.service_id as number)
}

// Tracks: tracked events under context.groupId, or else the user's customer; with neither, dropped.
// `properties` are the event's data.properties (the tracker applies data.customer and data.contact
// as attributes, which properties must never become). The events are stored applied, matched here
// as the tracker's apply job (tracker/apply.ts) would match them: to the customer by external
// id (unmatched when unknown) and to its contact, an unknown contact of a known customer created
// under the customer of its first event. A second job per batch to match them doubled the apply
// lag (docs/benchmarks.md).
const applyTracks = async (tx: Tx, accountId: number) => {
  await tx`
    update stage_seg s set group_id = c.external_id
    from contacts t join customers c on c.account_id = t.account_id and c.service_id = t.customer_id
    where s.status is null and s.type = 'track' and s.group_id is null
      and t.account_id = ${accountId} and t.external_id = s.user_id`
  await tx`update stage_seg set status = 'dropped', reason = 'no_customer'
    where status is null and type = 'track' and group_id is null`
  const created = await createContacts(
    tx,
    accountId,
    tx`s.status is null and s.type = 'track'`,
    tx`s.id`,
  )
  const [{ n }] = await tx`
    with e as (
      insert into tracking_events (account_id, name, occurred_at, customer_external_id,
        contact_external_id, data,
        status, customer_id, contact_id)
      select ${accountId}, s.event, s.occurred_at, s.group_id, s.user_id,
        case when s.properties is not null then jsonb_build_object('properties', s.properties) end,
        case when c.service_id is null then 'unmatched' else 'applied' end, c.service_id,
          t.service_id
      from stage_seg s
        left join customers c on c.account_id = ${accountId} and c.external_id = s.group_id
        left join contacts t on t.account_id = ${accountId} and t.external_id = s.user_id
          and t.customer_id = c.service_id
      where s.status is null and s.type = 'track' order by s.id
      returning 1
    ) select count(*)::int as n from e`
  return { events: n as number, created: created.map((r) => r.service_id as number) }
}

// The outcome of the staged messages, written back: applied unless decided otherwise (a status
// still null once every step ran: read through OUTCOME, as rewriting every staged row to say so
// took a twentieth of a batch), and a trait of the wrong type named (invalid_trait) on a message
// applied or pending all the same. A message the cursor moves past (below `below`) that was simply
// applied is not written: 'received' below the cursor means applied, and writing each one's status
// was most of a batch's time (docs/benchmarks.md).
const OUTCOME = "coalesce(s.status, 'applied')"
const written = (tx: Tx, below: number) =>
  tx`(status is not null or reason is not null or was_pending or id >= ${below})`
const settle = async (tx: Tx, accountId: number, below: number) => {
  await tx`
    update stage_seg s set reason = 'invalid_trait', detail = left(b.detail, 300)
    from (select id, string_agg(format('traits.%s: must be %s', key, expected),
      '; ' order by key) as detail
          from stage_traits where kind = 'invalid' group by id) b
    where s.id = b.id and s.reason is null`
  await tx`
    update segment_messages m set status = ${tx.unsafe(OUTCOME)}, reason = s.reason, detail = s.detail,
      -- A suppressed message keeps its messageId (deduplication) but nothing that names the person.
      user_id = case when s.reason = 'suppressed' then null else m.user_id end,
      group_id = case when s.reason = 'suppressed' then null else m.group_id end,
      traits = case when s.reason = 'suppressed' then null else m.traits end,
      properties = case when s.reason = 'suppressed' then null else m.properties end
    from stage_seg s
    where m.account_id = ${accountId} and m.id = any(array(select id from stage_seg where ${written(tx, below)}))
      and m.id = s.id`
}

// The account's running counts, each message counted once (a pending one when first staged), and
// what pending identifies expired.
const count = (tx: Tx, accountId: number) => tx`
  with expired as (
    update segment_messages set status = 'dropped', reason = 'pending_expired'
    where account_id = ${accountId} and status = 'pending'
      and received_at < now() - make_interval(hours => ${PENDING_HOURS})
    returning type, status, reason
  ), first as (
    select id, type, ${tx.unsafe(OUTCOME)} as status, reason from stage_seg s where not was_pending
  ), counts as (
    select 'type' as kind, type as key, count(*) as n from first group by type
    union all
    select 'reason', reason, count(*) from (select reason from first union all select reason
      from expired) r
    where reason is not null group by reason
    union all
    select t.entity || '_key', ${tx.unsafe(sqlCut('t.key'))}, count(*)
    from stage_traits t join first f on f.id = t.id
    where t.kind = 'dropped' group by 1, 2
  ), known as (
    select count(*) as n from segment_counts
    where account_id = ${accountId} and kind in ('customer_key', 'contact_key')
  ), added as (
    insert into segment_counts (account_id, kind, key, count)
    select ${accountId}, kind, key, n from counts c
    where c.kind in ('type', 'reason') or (select n from known) < ${MAX_KEY_NAMES}
      or exists (select 1 from segment_counts k where k.account_id = ${accountId}
        and k.kind = c.kind and k.key = c.key)
    on conflict (account_id, kind, key) do update set count = segment_counts.count + excluded.count
  )
  select coalesce(json_agg(o), '[]') as outcomes
  from (select type, status, reason, count(*)::int as n
        from (select type, ${tx.unsafe(OUTCOME)} as status, reason from stage_seg s
              where s.status is distinct from 'pending' or not was_pending
              union all select type, status, reason from expired) x
        group by 1, 2, 3) o`

// Messages done, past the deduplication window, go, oldest first. Ids grow with the time received,
// so they are a prefix of the account's messages: only its first rows are read, whatever the
// table holds, and none unless the very first is past the window (reading them every batch
// cost as much as a step).
const oldest = (tx: Tx, accountId: number) =>
  tx`(select received_at from segment_messages where account_id = ${accountId} order by id limit 1)`
const forget = (tx: Tx, accountId: number, below: number) => tx`
  delete from segment_messages where account_id = ${accountId} and id = any(array(
    select id from (select id, received_at, status from segment_messages
      where account_id = ${accountId}
                      and ${oldest(tx, accountId)} < now() - make_interval(days => ${KEEP_DAYS})
                    order by id limit ${MESSAGES_PER_BATCH}) first
    where received_at < now() - make_interval(days => ${KEEP_DAYS})
      and (status in ('applied', 'ignored', 'dropped') or (status = 'received'
        and id < ${below}))))`

export const applyRelay = async (tx: Tx, accountId: number) => {
  const cursor = await lockAndReadCursor(tx, TASKS.applyRelay, accountId)
  const next = await nextCheck(tx, cursor)
  // Compiling the batch's statements (above jit_above_cost) cost more than running them; the
  // received messages are missing from the statistics, as the tracker's events are (db/planner.ts).
  await setLocal(tx, { ...PLANNER.bulk, ...PLANNER.freshEvents })
  const { staged, last } = await stage(tx, accountId, cursor.below)
  const duplicates = await dropDuplicates(tx, accountId)
  await admit(tx, accountId)
  await classifyTraits(tx, accountId)
  await tx`analyze stage_traits`
  const customers = await applyGroups(tx, accountId)
  const contacts = await applyContacts(tx, accountId)
  const { events, created } = await applyTracks(tx, accountId)
  const below = nextBelow(cursor, staged === MESSAGES_PER_BATCH, last)
  await settle(tx, accountId, below)
  await moveCursor(tx, cursor, { below, next })
  const [{ outcomes }] = await count(tx, accountId)
  await forget(tx, accountId, Math.max(cursor.below, below))
  await tx`drop table stage_seg, stage_traits`
  await addJobs(tx, [
    ...scoreRecordsJobs(accountId, 'customer', [...new Set(customers)]),
    ...scoreRecordsJobs(accountId, 'contact', [...new Set([...contacts, ...created])]),
  ])
  if (customers.length > 0) await addCustomersChanged(tx, accountId)
  return {
    staged,
    // Only when some were found: the counts stay as they were otherwise.
    ...(duplicates > 0 ? { duplicates } : {}),
    customers: customers.length,
    contacts: contacts.length + created.length,
    events,
    outcomes,
  }
}

type Outcome = { type: string; status: string; reason: string | null; n: number }

// The account's messages, batch by batch (intake/batches.ts; the account's queue runs its uploads
// between its jobs). The counters count what committed. Then the account's tracked events: its
// tracks that name their customer (relay/intake.ts stores them as tracked events, and queues only
// this job) wait for the messages received before them, which this job has just applied. One job
// for both keeps the intake's job contention to one key, and never leaves such a track waiting for
// a job: a message still to apply has queued this job anew.
export const applyRelayOfAccount = async (app: App, { account_id: accountId }: AccountPayload) => {
  await passGate(app, TASKS.applyRelay, accountId)
  let messages = 0
  await applyBatches(
    app,
    TASKS.applyRelay,
    accountId,
    async (tx) => {
      const applied = await applyRelay(tx, accountId)
      return { ...applied, full: applied.staged === MESSAGES_PER_BATCH }
    },
    (done) => {
      for (const o of done.outcomes as Outcome[]) {
        relayApplied.inc({ type: o.type, outcome: o.status }, o.n)
        if (o.reason) relayDropped.inc({ reason: o.reason }, o.n)
      }
      if (done.duplicates) relayReceived.inc({ type: 'duplicate' }, done.duplicates)
      messages += done.staged
    },
  )
  return { messages, ...(await drainEvents(app, accountId)) }
}
