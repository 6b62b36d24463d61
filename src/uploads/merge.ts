// Citus (docs/operations.md): the staging tables are the coordinator's own, and Citus plans a join
// of one with a distributed table by sending the staged rows to the account's shard; it allows no
// subquery correlated to the staged rows there, so a record's absence is an anti-join.
import type { Tx } from '../db/client.ts'
import { lockRecordsIn, lockRecordsWhere } from '../db/locks.ts'
import { entityOf, TABLES, type Collection } from '../db/tables.ts'
import type { EventItem } from '../webhooks/events.ts'

// Set-based merge of an upload's records: the request folded its items into one record each
// (fold.ts), which are staged in a temporary table and merged with a handful of statements, never
// a query per item. A JSON null clears a value: jsonb_strip_nulls runs after every merge.

// One row per record, as the request folded it. A temporary table has no statistics until
// analyzed; without them the planner picks nested loops over the staged rows. Returns the external
// ids it staged.
const stageRecords = async (tx: Tx, accountId: number, uploadId: number) => {
  await tx`
    create temp table stage_records on commit drop as
    select r.* from uploads u, jsonb_to_recordset(u.items) as r(external_id text, name text,
      owner_email text, customer_external_id text, attributes jsonb, metrics jsonb,
      snapshots jsonb, first_ord int)
    where u.account_id = ${accountId} and u.id = ${uploadId}`
  await tx`analyze stage_records (external_id)`
  const [{ ids }] = await tx`select coalesce(array_agg(external_id), '{}') ids from stage_records`
  return ids as string[]
}

// The external ids staged in stage_records, as a condition on a record's external id. As an array
// they are probed in the (account_id, external_id) index: IN (subquery) was planned as a hash join
// over every record of the account, growing with it (docs/benchmarks.md).
const stagedExternalIds = (tx: Tx): ReturnType<Tx> =>
  tx`any(array(select external_id from stage_records))`

// The staged records of an upload, locked (db/locks.ts) before the merge changes them.
const lockStagedRecords = (tx: Tx, table: Collection, accountId: number) =>
  lockRecordsWhere(tx, table, accountId, stagedExternalIds(tx))

// Owners are linked by email, case-insensitively; an unknown email leaves the owner unchanged.
// `done`: records this merge already wrote, left alone when it updates the ones it missed (below).
const updateCustomers = (tx: Tx, accountId: number, done: number[]) => tx<Written[]>`
  update customers c set name = s.name,
    owner_user_id = coalesce(u.id, c.owner_user_id),
    attributes = jsonb_strip_nulls(c.attributes || coalesce(s.attributes, '{}')),
    updated_at = now()
  from stage_records s left join users u on u.account_id = ${accountId}
    and lower(u.email) = lower(s.owner_email)
  where c.account_id = ${accountId} and c.external_id = ${stagedExternalIds(tx)}
    and c.external_id = s.external_id
    and c.service_id <> all(${done}::bigint[])
  returning c.service_id, c.external_id`

// The anti-join names the staged ids as a constant: by the join's condition alone the account's
// customers were read whole, growing with it (docs/benchmarks.md); by stagedExternalIds, Citus
// copied them all to the coordinator.
const insertCustomers = (tx: Tx, accountId: number, staged: string[]) => tx`
  insert into customers (account_id, external_id, name, owner_user_id, attributes, metrics)
  select ${accountId}, s.external_id, s.name, u.id, jsonb_strip_nulls(coalesce(s.attributes, '{}')),
    s.metrics
  from stage_records s left join users u on u.account_id = ${accountId}
    and lower(u.email) = lower(s.owner_email)
    left join customers c on c.account_id = ${accountId} and c.external_id = s.external_id
      and c.external_id = any(${staged}::text[])
  where c.service_id is null
  order by s.first_ord
  returning service_id, external_id, name, created_at`

// An upload of customers warns of each owner email that no user of the account has.
const unknownOwners = async (tx: Tx, accountId: number) => {
  const owners = await tx`
    select s.external_id, s.owner_email from stage_records s
      left join users u on u.account_id = ${accountId} and lower(u.email) = lower(s.owner_email)
    where s.owner_email is not null and u.id is null
    order by s.first_ord`
  return owners.map((o) => ({
    external_id: o.external_id as string,
    message: `No user has the email ${o.owner_email}; the owner was left unchanged.`,
  }))
}

// A contact whose customer is not stored is ignored; one stored under another customer moves. Read
// first, then deleted: Citus deletes from no coordinator table by a distributed table's rows.
const dropOrphanContacts = async (tx: Tx, accountId: number) => {
  const orphans = await tx`
    select s.external_id from stage_records s
      left join customers c on c.account_id = ${accountId}
        and c.external_id = s.customer_external_id
    where c.service_id is null`
  const dropped = await tx`delete from stage_records where
      external_id = any(${orphans.map((o) => o.external_id)}::text[])`
  return dropped.count
}

const updateContacts = (tx: Tx, accountId: number, done: number[]) => tx<Written[]>`
  update contacts t set name = s.name, customer_id = c.service_id,
    attributes = jsonb_strip_nulls(t.attributes || coalesce(s.attributes, '{}')),
    updated_at = now()
  from stage_records s join customers c on c.account_id = ${accountId}
    and c.external_id = s.customer_external_id
  where t.account_id = ${accountId} and t.external_id = ${stagedExternalIds(tx)}
    and t.external_id = s.external_id
    and t.service_id <> all(${done}::bigint[])
  returning t.service_id, t.external_id`

// What contact.created tells of each new contact (its customer's external id comes from the stage,
// read by a statement of its own: Citus joins no coordinator table to an INSERT's RETURNING rows).
// The anti-join as insertCustomers'.
const insertContacts = async (tx: Tx, accountId: number, staged: string[]) => {
  const created = await tx`
    insert into contacts (account_id, external_id, customer_id, name, attributes, metrics)
    select ${accountId}, s.external_id, c.service_id, s.name,
      jsonb_strip_nulls(coalesce(s.attributes, '{}')),
      s.metrics
    from stage_records s join customers c on c.account_id = ${accountId}
      and c.external_id = s.customer_external_id
      left join contacts t on t.account_id = c.account_id and t.external_id = s.external_id
        and t.external_id = any(${staged}::text[])
    where t.service_id is null
    order by s.first_ord
    returning service_id, external_id, name, created_at`
  const customers = await tx`select external_id, customer_external_id from stage_records
    where external_id = any(${created.map((n) => n.external_id)}::text[])`
  const customerOf = new Map(
    customers.map((r) => [r.external_id as string, r.customer_external_id as string]),
  )
  return created
    .map((n) => ({
      service_id: n.service_id as number,
      contact_external_id: n.external_id as string,
      name: n.name as string | null,
      customer_external_id: customerOf.get(n.external_id)!,
      created_at: n.created_at as Date,
    }))
    .sort((x, y) => x.service_id - y.service_id)
}

const tables = (collection: Collection) => TABLES[entityOf(collection)]

// The records an upload created or updated, as its statements returned them.
interface Written {
  service_id: number
  external_id: string
}

// A new record as written: contact.created names its contact's external id contact_external_id.
const writtenOf = (
  r: { service_id: number } & ({ external_id: string } | { contact_external_id: string }),
) => ({
  service_id: r.service_id,
  external_id: 'external_id' in r ? r.external_id : r.contact_external_id,
})

// The staged values of these records, by their service ids: known from the statements that wrote
// the records, so the staged rows are never joined with the account's records again.
const stagedValuesOf = (tx: Tx, records: Written[]) => tx`
  select m.record_id, v.key::date as date, v.value as vals
  from stage_records s join unnest(${records.map((r) => r.external_id)}::text[],
    ${records.map((r) => r.service_id)}::bigint[]) as m(external_id, record_id) using (external_id)
    cross join jsonb_each(s.snapshots) v`

// The snapshots of the records created in this transaction, written once from the staged values:
// no other transaction sees these records, so there is nothing to merge with, nothing to lock and
// no conflict to look for (ON CONFLICT's speculative insertion cost 25% more: docs/benchmarks.md).
const insertNewSnapshots = (
  tx: Tx,
  accountId: number,
  collection: Collection,
  created: Written[],
) => {
  const { snapshots, fk } = tables(collection)
  return tx`
    insert into ${tx(snapshots)} (account_id, ${tx(fk)}, date, "values")
    select ${accountId}, s.record_id, s.date, jsonb_strip_nulls(s.vals)
      from (${stagedValuesOf(tx, created)}) s`
}

// Existing snapshots first: a JSON null in the staged values must clear the key, which the insert's
// EXCLUDED row (stripped of nulls) cannot do. Then every staged row is inserted with one probe of
// the unique index each (NOT EXISTS scanned all the account's snapshots); a conflict is a row the
// update just merged, or one a concurrent request added since.
const updateSnapshots = (tx: Tx, accountId: number, collection: Collection) => tx`
  update ${tx(tables(collection).snapshots)} t set
    "values" = jsonb_strip_nulls(t."values" || s.vals)
  from stage_snapshots s
  where t.account_id = ${accountId} and t.${tx(tables(collection).fk)} = s.record_id
    and t.date = s.date`

const insertSnapshots = (tx: Tx, accountId: number, collection: Collection) => {
  const { snapshots, fk } = tables(collection)
  return tx`
    insert into ${tx(snapshots)} as t (account_id, ${tx(fk)}, date, "values")
    select ${accountId}, s.record_id, s.date, jsonb_strip_nulls(s.vals) from stage_snapshots s
    on conflict (account_id, ${tx(fk)}, date) do update
      set "values" = t."values" || excluded."values"
    where not t."values" @> excluded."values"`
}

// metrics = each metric's value in the latest snapshot that holds it: the snapshots folded in
// date order, later dates winning. (A record created in this transaction was inserted with its
// metrics: fold.ts.) The subquery names the account itself: Citus prunes its shards by the
// constant, not r's column.
const refreshLatestMetrics = (tx: Tx, accountId: number, collection: Collection) => tx`
  update ${tx(tables(collection).records)} r set metrics = (
    select jsonb_merge_agg(t."values" order by t.date)
    from ${tx(tables(collection).snapshots)} t
    where t.account_id = ${accountId} and t.${tx(tables(collection).fk)} = r.service_id)
  from (select distinct record_id from stage_snapshots) s
  where r.account_id = ${accountId} and r.service_id = s.record_id`

// Merges whatever is staged in stage_snapshots (record_id, date, vals) into the snapshots of stored
// records and refreshes those records' metrics; the tracking aggregation stages its counts the
// same way.
export const mergeStagedSnapshots = async (tx: Tx, accountId: number, collection: Collection) => {
  // Without statistics the update joins by hashing all the account's snapshots
  // (docs/benchmarks.md).
  await tx`analyze stage_snapshots (record_id, date)`
  await lockRecordsIn(tx, collection, accountId, tx`select record_id from stage_snapshots`)
  await updateSnapshots(tx, accountId, collection)
  await insertSnapshots(tx, accountId, collection)
  await refreshLatestMetrics(tx, accountId, collection)
}

// The new records' snapshots are inserted; the updated records' are staged and merged.
const mergeSnapshots = async (
  tx: Tx,
  accountId: number,
  collection: Collection,
  created: Written[],
  updated: Written[],
) => {
  if (created.length) await insertNewSnapshots(tx, accountId, collection, created)
  if (!updated.length) return
  await tx`create temp table stage_snapshots on commit drop as ${stagedValuesOf(tx, updated)}`
  await mergeStagedSnapshots(tx, accountId, collection)
}

type Warning = { external_id: string; message: string }

// What each collection's merge does its own way; the staging, the locks and the snapshots are
// shared. `ignore`: drops the staged records that cannot be merged, before any is locked, and
// counts them. `insert`: the new records, as `event` tells of them (created_at a Date, which the
// payload's JSON writes as its ISO text).
const KINDS = {
  customers: {
    ignore: async () => 0,
    update: updateCustomers,
    insert: async (tx: Tx, accountId: number, staged: string[]) =>
      (await insertCustomers(tx, accountId, staged)) as unknown as EventItem<'customer.created'>[],
    warnings: unknownOwners,
    event: 'customer.created',
  },
  contacts: {
    ignore: dropOrphanContacts,
    update: updateContacts,
    insert: async (tx: Tx, accountId: number, staged: string[]) =>
      (await insertContacts(tx, accountId, staged)) as unknown as EventItem<'contact.created'>[],
    warnings: async (): Promise<Warning[]> => [],
    event: 'contact.created',
  },
} as const

type Created = (typeof KINDS)[Collection]['event']

export interface MergeResult {
  created: number
  // The new records, for the customer.created or contact.created events.
  event: Created
  newRecords: EventItem<Created>[]
  updated: number
  ignored: number
  ids: number[]
  warnings: Warning[]
}

// Where a merge that runs beside the merge of the upload before it (process.ts) waits its turn:
// once staged, with the external ids it staged, before it locks a record; before it creates
// records, so that new records take service ids in the order of their uploads; once created.
export interface Turn {
  staged: (externalIds: string[]) => Promise<void>
  creating: () => Promise<void>
  created: () => void
}
export const ALONE: Turn = { staged: async () => {}, creating: async () => {}, created: () => {} }

export const mergeRecords = async (
  tx: Tx,
  accountId: number,
  uploadId: number,
  collection: Collection,
  turn = ALONE,
): Promise<MergeResult> => {
  const kind = KINDS[collection]
  const staged = await stageRecords(tx, accountId, uploadId)
  await turn.staged(staged)
  const ignored = await kind.ignore(tx, accountId)
  await lockStagedRecords(tx, collection, accountId)
  const first = await kind.update(tx, accountId, [])
  await turn.creating()
  const created = await kind.insert(tx, accountId, staged)
  turn.created()
  // A record that another transaction created after the lock, and committed between the update's
  // read and the insert's, was neither: it is updated now, so that none of the upload's is lost.
  const done = [...first.map((r) => r.service_id), ...created.map((r) => r.service_id)]
  const missed = staged.length - ignored > done.length
  const updated = missed ? [...first, ...(await kind.update(tx, accountId, done))] : first
  const warnings = await kind.warnings(tx, accountId)
  await mergeSnapshots(tx, accountId, collection, created.map(writtenOf), updated)
  return {
    created: created.length,
    event: kind.event,
    newRecords: created,
    updated: updated.length,
    ignored,
    ids: [...updated.map((r) => r.service_id), ...created.map((r) => r.service_id)],
    warnings,
  }
}
