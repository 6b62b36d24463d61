import type { Sql, Tx } from './client.ts'
import type { Collection } from './tables.ts'

// Row locks on records, taken in service_id order before a transaction changes them or their
// snapshots. Uploads, tracking and aggregation (the account's queue) and the churn that scoring
// lifts (its scoring queue) run side by side and may change the same records: transactions that
// take their shared locks in one order cannot wait on each other in a cycle. FOR NO KEY UPDATE is
// what their UPDATEs take anyway; the snapshot inserts' foreign key checks (KEY SHARE) do not
// conflict with it.
// Records whose external id meets `externalId`, a condition on it (`= any(...)`).
export const lockRecordsWhere = (
  tx: Tx,
  table: Collection,
  accountId: number,
  externalId: ReturnType<Tx>,
) => tx`
  select 1 from ${tx(table)} where account_id = ${accountId} and external_id = ${externalId}
  order by service_id for no key update`

// Records by service_id: `ids` is a query yielding them (staged snapshots, staged events, a list).
export const lockRecordsIn = (
  tx: Tx,
  table: Collection,
  accountId: number,
  ids: ReturnType<Tx>,
) => tx`
  select 1 from ${tx(table)} where account_id = ${accountId} and service_id in (${ids})
  order by service_id for no key update`

// Records by external id: `externalIds` is a query yielding them. Each is probed in the
// (account_id, external_id) index (OFFSET 0 keeps each probe a subquery of its own). As
// `external_id = any(array(...))` a table small enough to be read whole compared each of its rows
// with every id of the batch: 90 ms a batch of 5,000 Segment messages at 800 contacts, growing with
// both (docs/benchmarks.md).
const serviceIdsOf = (
  tx: Tx,
  table: Collection,
  accountId: number,
  externalIds: ReturnType<Tx>,
): ReturnType<Tx> => tx`
  select r.service_id from (select distinct x from (${externalIds}) e(x)) e
    cross join lateral (select service_id from ${tx(table)} r where r.account_id = ${accountId}
                          and r.external_id = e.x offset 0) r`
export const lockRecordsNamed = (
  tx: Tx,
  table: Collection,
  accountId: number,
  externalIds: ReturnType<Tx>,
) => lockRecordsIn(tx, table, accountId, serviceIdsOf(tx, table, accountId, externalIds))

// Advisory locks, each named by a text key ('apply_events:42') hashed to the bigint PostgreSQL
// locks: the one place a key is written, so that two writers of one key cannot spell it two ways.
const lockKey = (sql: Sql | Tx, name: string) => sql`hashtextextended(${name}::text, 0)`

// Held until the transaction ends, as a fragment of a select list (beside other statements' parts).
export const xactLock = (tx: Sql | Tx, name: string) =>
  tx`pg_advisory_xact_lock(${lockKey(tx, name)})`
export const sharedXactLock = (tx: Sql | Tx, name: string) =>
  tx`pg_advisory_xact_lock_shared(${lockKey(tx, name)})`
export const takeXactLock = (tx: Tx, name: string) => tx`select ${xactLock(tx, name)}`

// The virtual transaction ids that hold the lock now. pg_locks shows an advisory lock on a bigint
// by its high and low halves.
export const lockHolders = (sql: Sql, name: string) => sql<{ holders: string[] }[]>`
  select coalesce(array_agg(l.virtualtransaction), '{}') as holders
  from (select ${lockKey(sql, name)} as k) g
    join pg_locks l on l.locktype = 'advisory' and l.granted and l.objsubid = 1
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = ((g.k >> 32) & 4294967295)::oid and l.objid = (g.k & 4294967295)::oid`

// The migrations' lock (db/migrate.ts), on a session or a transaction. Its key keeps the 32-bit
// hash it has always had: a starter of an older version takes that one.
const migrationsKey = (sql: Sql | Tx) => sql`hashtext('service:migrations')`
export const tryMigrationsLock = async (conn: Sql) =>
  (await conn<{ ok: boolean }[]>`select pg_try_advisory_lock(${migrationsKey(conn)}) as ok`)[0].ok
export const releaseMigrationsLock = (conn: Sql) =>
  conn`select pg_advisory_unlock(${migrationsKey(conn)})`
export const migrationsXactLock = (tx: Tx) => tx`select pg_advisory_xact_lock(${migrationsKey(tx)})`
