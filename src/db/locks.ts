import type { Tx } from './client.ts'
import type { Collection } from './tables.ts'

// Row locks on records, taken in service_id order before a transaction changes them or their
// snapshots. Uploads, tracking and aggregation (the account's queue) and the churn that scoring
// lifts (its scoring queue) run side by side and may change the same records: transactions that
// take their shared locks in one order cannot wait on each other in a cycle. FOR NO KEY UPDATE is
// what their UPDATEs take anyway; the snapshot inserts' foreign key checks (KEY SHARE) do not
// conflict with it.

// The external ids staged in the temporary table stage_records, as a condition on a record's
// external id. As an array they are probed in the (account_id, external_id) index: IN (subquery) was
// planned as a hash join over every record of the account, growing with it (docs/benchmarks.md).
export const stagedExternalIds = (tx: Tx) => tx`any(array(select external_id from stage_records))`

// The staged records of an upload, by external id.
export const lockStagedRecords = (tx: Tx, table: Collection, accountId: number) => tx`
  select 1 from ${tx(table)} where account_id = ${accountId} and external_id = ${stagedExternalIds(tx)}
  order by service_id for no key update`

// Records by service_id: `ids` is a query yielding them (staged snapshots, staged events, a list).
export const lockRecordsIn = (tx: Tx, table: Collection, accountId: number, ids: ReturnType<Tx>) => tx`
  select 1 from ${tx(table)} where account_id = ${accountId} and service_id in (${ids})
  order by service_id for no key update`

// Records by external id: `externalIds` is a query yielding them. Each is probed in the
// (account_id, external_id) index (OFFSET 0 keeps each probe a subquery of its own). As `external_id =
// any(array(...))` a table small enough to be read whole compared each of its rows with every id of the
// batch: 90 ms a batch of 5,000 Segment messages at 800 contacts, growing with both (docs/benchmarks.md).
const serviceIdsOf = (tx: Tx, table: Collection, accountId: number, externalIds: ReturnType<Tx>): ReturnType<Tx> => tx`
  select r.service_id from (select distinct x from (${externalIds}) e(x)) e
    cross join lateral (select service_id from ${tx(table)} r where r.account_id = ${accountId}
                          and r.external_id = e.x offset 0) r`
export const lockRecordsNamed = (tx: Tx, table: Collection, accountId: number, externalIds: ReturnType<Tx>) =>
  lockRecordsIn(tx, table, accountId, serviceIdsOf(tx, table, accountId, externalIds))
