import type { Tx } from '../db/client.ts'
import {
  addCustomersChanged,
  addJobs,
  addRecomputeSegments,
  countEventsJob,
  scoreRecordsJobs,
} from '../db/jobs.ts'
import { lockRecordsIn } from '../db/locks.ts'
import { suppress } from '../tracking/suppressions.ts'
import { blankDeliveries } from './retention.ts'

// One erasure, set-based, in the caller's transaction (docs/security.md, "Privacy"). The people are
// staged from erasure_targets into temporary tables; each statement then removes or redacts one
// kind of row and is counted. Children are deleted before their records, so that each kind is
// counted (a record's cascade would hide them). No webhook is sent about an erasure: its payload
// would name the person again.

// erase_customers: the customers named (service_id null when no such record exists).
// erase_contacts: the contacts named, under the customer named with them, and every contact of an
// erased customer. A contact named under another customer than its own keeps its record, but its
// events, deliveries and notifications go, and it is suppressed: the external id names the person.
// The needles returned: each external id as a JSON string, as it appears in stored JSON text. A
// parameter, not a third table: Citus refuses a subquery on a coordinator table correlated to a
// distributed one, which matching every stored row against the needles is.
const stage = async (tx: Tx, accountId: number, erasureId: number) => {
  await tx`
    create temp table erase_customers on commit drop as
    select distinct t.customer_external_id as external_id, c.service_id
    from erasure_targets t
      left join customers c on c.account_id = ${accountId}
        and c.external_id = t.customer_external_id
    where t.account_id = ${accountId} and t.erasure_id = ${erasureId}
      and t.contact_external_id is null`
  await tx`
    create temp table erase_contacts on commit drop as
    select t.contact_external_id as external_id, k.service_id, k.customer_id
    from erasure_targets t
      left join customers c on c.account_id = ${accountId}
        and c.external_id = t.customer_external_id
      left join contacts k on k.account_id = ${accountId} and k.external_id = t.contact_external_id
        and k.customer_id = c.service_id
    where t.account_id = ${accountId} and t.erasure_id = ${erasureId}
      and t.contact_external_id is not null
    union
    select k.external_id, k.service_id, k.customer_id
    from erase_customers e join contacts k on k.account_id = ${accountId}
      and k.customer_id = e.service_id`
  await tx`analyze erase_customers, erase_contacts`
  const [{ needles }] = await tx<{ needles: string[] }[]>`
    select coalesce(array_agg(distinct to_json(external_id::text)::text), '{}') as needles
    from (select external_id from erase_customers union all select external_id
      from erase_contacts) x`
  return needles
}

const ids = (
  tx: Tx,
  table: 'erase_customers' | 'erase_contacts',
  column: 'service_id' | 'external_id',
) => tx`any(array(select ${tx(column)} from ${tx(table)} where ${tx(column)} is not null))`

// The four sets of the people's ids that stored rows are matched against.
const idSets = (tx: Tx) => ({
  customers: ids(tx, 'erase_customers', 'service_id'),
  contacts: ids(tx, 'erase_contacts', 'service_id'),
  customer_external_ids: ids(tx, 'erase_customers', 'external_id'),
  contact_external_ids: ids(tx, 'erase_contacts', 'external_id'),
})

type IdSet = keyof ReturnType<typeof idSets>

// A record's children, each counted under its table and naming the record by its id in `column`,
// go before the record itself.
const family = (record: 'contacts' | 'customers', column: string, children: string[]) => [
  ...children.map((table) => [table, table, column, record] as const),
  [record, record, 'service_id', record] as const,
]

// The rows deleted because one column names one of the people: the kind they are counted as, the
// table, the column and the set it is matched against. A table that names them in either of two
// columns has two rows of one kind, counted together. Children come before their records.
const BY_COLUMN: readonly (readonly [string, string, string, IdSet])[] = [
  // Segment messages, applied or waiting (pending identifies), carry the ids and the traits.
  ['segment_messages', 'segment_messages', 'group_id', 'customer_external_ids'],
  ['segment_messages', 'segment_messages', 'user_id', 'contact_external_ids'],
  ['segment_memberships', 'segment_members', 'customer_id', 'customers'],
  ['segment_memberships', 'segment_members', 'external_id', 'customer_external_ids'],
  ...family('contacts', 'contact_id', ['contact_tags', 'contact_snapshots', 'contact_scores']),
  ...family('customers', 'customer_id', [
    'customer_tags',
    'customer_snapshots',
    'customer_scores',
    'customer_contributions',
  ]),
]

// Rows removed or redacted, per kind.
type Counts = Record<string, number>

// Stored JSON text that holds one of the people's external ids as a string.
const names = (tx: Tx, needles: string[], text: ReturnType<Tx>) =>
  tx`exists (select 1 from unnest(${needles}::text[]) needles(needle) where strpos(${text},
    needles.needle) > 0)`

const counted = async (query: Promise<unknown>) => ((await query) as { n: number }[])[0].n

const deleted = (tx: Tx, statement: ReturnType<Tx>) =>
  counted(tx`with d as (${statement} returning 1) select count(*)::int as n from d`)

const eraseStaged = async (tx: Tx, accountId: number, needles: string[]): Promise<Counts> => {
  await lockRecordsIn(
    tx,
    'customers',
    accountId,
    tx`select service_id from erase_customers union select customer_id from erase_contacts`,
  )
  await lockRecordsIn(tx, 'contacts', accountId, tx`select service_id from erase_contacts`)
  const sets = idSets(tx)
  const counts: Counts = {
    // By external ids alone: they are never rewritten, so the records an event was matched to
    // (customer_id, contact_id) are named by its external ids too; matching on those ids as well
    // would keep the planner from the two external id indexes (sql/044) and read every event.
    tracking_events: await deleted(
      tx,
      tx`delete from tracking_events e where e.account_id = ${accountId} and (
        e.customer_external_id = ${sets.customer_external_ids}
        or e.contact_external_id = ${sets.contact_external_ids})`,
    ),
    tracked_keys: await deleted(
      tx,
      tx`delete from tracked_keys k where k.account_id = ${accountId} and (
        (k.entity = 'customer' and k.record_id = ${sets.customers})
        or (k.entity = 'contact' and k.record_id = ${sets.contacts}))`,
    ),
    notifications: await deleted(
      tx,
      tx`delete from notifications n where n.account_id = ${accountId}
        and ${names(tx, needles, tx`n.body::text`)}`,
    ),
    // A delivery still pending fails, and recovery skips it.
    webhook_deliveries: await counted(tx`
      with ${blankDeliveries(tx, accountId, names(tx, needles, tx`d.payload`))}
      select count(*)::int as n from blanked`),
    uploads: await counted(tx`
      with u as (
        update uploads u set
          items = (select jsonb_agg(i order by o) from jsonb_array_elements(u.items)
            with ordinality x(i, o)
            where not ${names(tx, needles, tx`i::text`)}),
          warnings = (select coalesce(jsonb_agg(w order by o),
            '[]') from jsonb_array_elements(u.warnings)
            with ordinality x(w, o) where not ${names(tx, needles, tx`w::text`)})
        where u.account_id = ${accountId} and
          ${names(tx, needles, tx`coalesce(u.items::text, '') || u.warnings::text`)}
        returning 1
      ) select count(*)::int as n from u`),
    // The audit log keeps what was done and by whom; the target segments that named
    // them are blanked.
    audit_entries: await counted(tx`
      with a as (
        update audit_entries a set target = array(
          select case when to_json(t)::text = any(${needles}::text[]) then null else t end
          from unnest(a.target) with ordinality x(t, o) order by o)
        where a.account_id = ${accountId} and ${names(tx, needles, tx`to_json(a.target)::text`)}
        returning 1
      ) select count(*)::int as n from a`),
  }
  for (const [kind, table, column, set] of BY_COLUMN) {
    counts[kind] =
      (counts[kind] ?? 0) +
      (await deleted(
        tx,
        tx`delete from ${tx(table)} where account_id = ${accountId}
          and ${tx(column)} = ${sets[set]}`,
      ))
  }
  return counts
}

// The customers that remain after their contacts went: their aggregates (the event counts of the
// daily run, which also rescores what they change) and their scores are computed again.
const recompute = async (tx: Tx, accountId: number, counts: Counts) => {
  const remaining = await tx<{ customer_id: number }[]>`
    select distinct k.customer_id from erase_contacts k
      join customers c on c.account_id = ${accountId} and c.service_id = k.customer_id
    where not (k.customer_id = ${ids(tx, 'erase_customers', 'service_id')})
    order by 1`
  await addJobs(tx, [
    ...scoreRecordsJobs(
      accountId,
      'customer',
      remaining.map((r) => r.customer_id),
    ),
    ...(counts.tracking_events > 0 && remaining.length > 0 ? [countEventsJob(accountId)] : []),
  ])
  if (counts.customers > 0) await addCustomersChanged(tx, accountId)
  else if (counts.segment_memberships > 0) await addRecomputeSegments(tx, accountId)
  return remaining.length
}

// Erases the people of one erasure request, suppresses their external ids, and forgets who they
// were (the targets); returns the counts the erasure log keeps.
export const erase = async (tx: Tx, accountId: number, erasureId: number) => {
  const needles = await stage(tx, accountId, erasureId)
  const counts = await eraseStaged(tx, accountId, needles)
  const rescored = await recompute(tx, accountId, counts)
  const suppressions = (
    await suppress(
      tx,
      accountId,
      erasureId,
      tx`select 'customer', external_id from erase_customers
        union all select 'contact', external_id from erase_contacts`,
    )
  ).count
  await tx`delete from erasure_targets where account_id = ${accountId}
    and erasure_id = ${erasureId}`
  return { ...counts, suppressions, customers_rescored: rescored }
}
