import type { ReservedSql } from './client.ts'

// On a database with the citus extension, `migrate` ends by distributing what the files created as
// plain tables (docs/operations.md, "Running on Citus"): every public table with an account_id
// column is distributed by it, all in one co-location group, and `accounts`, which every tenant's
// request reads, becomes a reference table. The rest (schema_migrations, heartbeats, the service's
// own bookkeeping, graphile-worker's schema) stays on the coordinator. It runs after every migrate,
// so a table a later file creates is distributed by the migrate that creates it; a plain
// PostgreSQL has no citus extension and nothing happens there.

const REFERENCE_TABLES = ['accounts']

export const hasCitus = async (conn: ReservedSql) =>
  (
    await conn<
      { on: boolean }[]
    >`select exists(select 1 from pg_extension where extname = 'citus') as on`
  )[0].on

export const hasDistributedTables = async (conn: ReservedSql) =>
  (
    await conn<
      { any: boolean }[]
    >`select exists(select 1 from pg_dist_partition where partmethod = 'h') as any`
  )[0].any

// Tenant tables not yet distributed by hash: plain tables, and the "Citus local tables" that Citus
// makes of a plain table once it has a foreign key to a reference table.
const pendingTenantTables = async (conn: ReservedSql) =>
  (
    await conn<{ name: string }[]>`
      select c.relname as name from pg_class c
      where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
        and not c.relispartition
        and exists (select 1 from pg_attribute a where a.attrelid = c.oid
          and a.attname = 'account_id'
          and not a.attisdropped)
        and not exists (select 1 from pg_dist_partition p where p.logicalrelid = c.oid
          and p.partmethod = 'h')
      order by c.relname`
  ).map((r) => r.name)

const pendingReferenceTables = async (conn: ReservedSql) =>
  (
    await conn<{ name: string }[]>`
      select t as name from unnest(${REFERENCE_TABLES}::text[]) t
      where to_regclass(t) is not null and not exists (select 1 from pg_dist_partition p
        where p.logicalrelid = to_regclass(t) and p.partmethod = 'n' and p.repmodel = 't')`
  ).map((r) => r.name)

// A distributed table already in place anchors the co-location group.
const anchor = async (conn: ReservedSql) =>
  (
    await conn<
      { name: string }[]
    >`select logicalrelid::regclass::text as name from pg_dist_partition
      where partmethod = 'h' and logicalrelid::regclass::text not like '%.%'
        order by colocationid, 1 limit 1`
  )[0]?.name

// A constraint or trigger of a table, and its definition.
interface Named {
  table: string
  name: string
  def: string
}

// The foreign keys that touch the tables about to change: Citus distributes a table only without
// them, and adds them back once both ends are distributed (or the far end is a reference table).
const foreignKeys = (conn: ReservedSql, tables: string[]) => conn<Named[]>`
      select conrelid::regclass::text as "table", conname as name, pg_get_constraintdef(oid) as def
      from pg_constraint where contype = 'f' and connamespace = 'public'::regnamespace
        and (conrelid::regclass::text = any(${tables})
          or confrelid::regclass::text = any(${tables}))
      order by conrelid::regclass::text, conname`

// The triggers of those tables: dropped while Citus copies their rows into the shards (the rows are
// already consistent, and a trigger firing on a shard would look for tables not yet distributed),
// then created again, which Citus does on every shard.
const triggers = (conn: ReservedSql, tables: string[]) => conn<Named[]>`
      select tgrelid::regclass::text as "table", tgname as name, pg_get_triggerdef(t.oid) as def
      from pg_trigger t
      where not tgisinternal and tgrelid::regclass::text = any(${tables})
      order by tgrelid::regclass::text, tgname`

// A shard move copies a whole co-location group with logical replication, which cannot publish an
// unlogged table (rate_limit_counters): on Citus such a tenant table is made logged before it is
// distributed, so that adding a worker and rebalancing never blocks writes.
const unlogged = async (conn: ReservedSql, tables: string[]) =>
  (
    await conn<
      { name: string }[]
    >`select relname as name from pg_class where relnamespace = 'public'::regnamespace
      and relpersistence = 'u' and relname = any(${tables}) order by 1`
  ).map((r) => r.name)

const citusLocal = async (conn: ReservedSql, table: string) =>
  (
    await conn<{ local: boolean }[]>`
      select exists(select 1 from pg_dist_partition where logicalrelid = to_regclass(${table})
        and partmethod = 'n' and repmodel <> 't') as local`
  )[0].local

export const distributeTables = async (conn: ReservedSql) => {
  if (!(await hasCitus(conn))) return []
  const tenant = await pendingTenantTables(conn)
  const reference = await pendingReferenceTables(conn)
  if (tenant.length === 0 && reference.length === 0) return []
  const keys = await foreignKeys(conn, [...tenant, ...reference])
  const fired = await triggers(conn, [...tenant, ...reference])
  // Each Citus command as a statement of its own: Citus refuses a string that holds two.
  await conn.unsafe('begin')
  try {
    // One connection per worker for the whole step: DDL that follows a parallel command on the same
    // shards would otherwise be refused inside one transaction.
    await conn.unsafe(`set local citus.multi_shard_modify_mode to 'sequential'`)
    // The tag-link triggers (sql/047) run on the shards.
    await conn.unsafe('set local citus.enable_unsafe_triggers to on')
    for (const k of keys) await conn.unsafe(`alter table ${k.table} drop constraint ${k.name}`)
    for (const t of fired) await conn.unsafe(`drop trigger ${t.name} on ${t.table}`)
    // Dropping a local table's last key to a reference table turns it back into a plain table
    // (Citus undoes the conversion it made); one it keeps is undone by hand.
    for (const t of tenant)
      if (await citusLocal(conn, t)) await conn`select undistribute_table(${t})`
    for (const t of await unlogged(conn, tenant)) await conn.unsafe(`alter table ${t} set logged`)
    let group = await anchor(conn)
    for (const t of tenant) {
      await conn`select create_distributed_table(${t}, 'account_id',
        colocate_with => ${group ?? 'none'})`
      group ??= t
    }
    for (const t of reference) {
      if (await citusLocal(conn, t)) await conn`select undistribute_table(${t})`
      await conn`select create_reference_table(${t})`
    }
    for (const k of keys)
      await conn.unsafe(`alter table ${k.table} add constraint ${k.name} ${k.def}`)
    for (const t of fired) await conn.unsafe(t.def)
    await conn.unsafe('commit')
  } catch (err) {
    await conn.unsafe('rollback')
    throw err
  }
  return [...tenant, ...reference]
}
