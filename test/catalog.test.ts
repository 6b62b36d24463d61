// The migrated schema stays ready to be distributed by account_id (e.g. on Citus): every tenant
// table's primary key leads with account_id, and every unique index and foreign key carries it.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { freshDatabase, GLOBAL_TABLES } from './helpers/db.ts'

// Tables that are not a tenant's: the tenants themselves, and the service's own
// bookkeeping and keys.

let db: Awaited<ReturnType<typeof freshDatabase>>
let sql: Sql
before(async () => {
  db = await freshDatabase()
  sql = connect(db.url)
  await migrate(sql, db.url)
})
after(async () => {
  await sql.end()
  await db.drop()
})

const tenantTables = async () =>
  (
    await sql`
    select c.relname from pg_class c where c.relnamespace = 'public'::regnamespace
      and c.relkind in ('r', 'p')
      and c.relname <> all(${GLOBAL_TABLES}) order by 1`
  ).map((r) => r.relname as string)

// The column names of a constraint's or index's keys, in order.
const keyColumns = (table: string, attnums: number[]) =>
  sql`select array_agg(a.attname order by k.i) as cols from unnest(${attnums}::int2[])
    with ordinality k(n, i)
      join pg_attribute a on a.attrelid = ${table}::regclass and a.attnum = k.n`

test('every tenant table has account_id and a primary key that leads with it', async () => {
  const tables = await tenantTables()
  assert.ok(tables.length >= 15, `tenant tables: ${tables}`)
  for (const table of tables) {
    const [pk] = await sql`select conkey from pg_constraint where conrelid = ${table}::regclass
        and contype = 'p'`
    assert.ok(pk, `${table} has no primary key`)
    const [{ cols }] = await keyColumns(table, pk.conkey)
    assert.equal(cols[0], 'account_id', `${table}: primary key (${cols})`)
  }
})

test('every unique index of a tenant table includes account_id', async () => {
  const indexes = await sql`
    select c.relname as tbl, i.indexrelid::regclass::text as idx, i.indkey::int2[] as keys
      from pg_index i
    join pg_class c on c.oid = i.indrelid
    where c.relnamespace = 'public'::regnamespace and i.indisunique
      and c.relname <> all(${GLOBAL_TABLES})`
  assert.ok(indexes.length >= 15)
  for (const { tbl, idx, keys } of indexes) {
    const [{ cols }] = await keyColumns(tbl, keys)
    assert.ok(cols.includes('account_id'), `${idx} (${cols})`)
  }
})

test('every foreign key between tenant tables carries account_id on both sides', async () => {
  const keys = await sql`
    select conname, conrelid::regclass::text as tbl, confrelid::regclass::text as ref, conkey,
    confkey
    from pg_constraint where contype = 'f' and connamespace = 'public'::regnamespace`
  assert.ok(keys.length >= 20, `foreign keys: ${keys.length}`)
  for (const k of keys) {
    const [{ cols }] = await keyColumns(k.tbl, k.conkey)
    const [{ cols: refCols }] = await keyColumns(k.ref, k.confkey)
    if (k.ref === 'accounts') assert.deepEqual(refCols, ['id'], k.conname)
    else
      assert.ok(
        cols.includes('account_id') && refCols.includes('account_id'),
        `${k.conname}: (${cols}) -> (${refCols})`,
      )
  }
})
