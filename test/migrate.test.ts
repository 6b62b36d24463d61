import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from '../src/db/client.ts'
import { migrate, migrations } from '../src/db/migrate.ts'
import { freshDatabase } from './helpers/db.ts'

test('migrations apply once, in order, and a second run is a no-op', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    const first = await migrate(sql, db.url)
    assert.deepEqual(first, migrations().map((m) => m.name))
    assert.ok(first.length >= 1 && first.every((n, i, a) => i === 0 || a[i - 1] < n))
    const tables = await sql`select count(*)::int as n from information_schema.tables where table_schema = 'public'`
    assert.deepEqual(await migrate(sql, db.url), [])
    assert.deepEqual(await sql`select count(*)::int as n from information_schema.tables where table_schema = 'public'`, tables)
    const [{ n }] = await sql`select count(*)::int as n from schema_migrations`
    assert.equal(n, first.length)
    const [{ jobs }] = await sql`select to_regclass('graphile_worker.jobs') is not null as jobs`
    assert.equal(jobs, true)
  } finally {
    await sql.end()
    await db.drop()
  }
})

test('concurrent migrators wait on the advisory lock and apply each file once', async () => {
  const db = await freshDatabase()
  const a = connect(db.url)
  const b = connect(db.url)
  try {
    const [ra, rb] = await Promise.all([migrate(a, db.url), migrate(b, db.url)])
    assert.equal(ra.length + rb.length, migrations().length)
  } finally {
    await a.end()
    await b.end()
    await db.drop()
  }
})

test('every tenant table leads its primary key with account_id', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await migrate(sql, db.url)
    const rows = await sql`
      select c.relname as table, (select a.attname from pg_attribute a where a.attrelid = c.oid and a.attnum = i.indkey[0]) as first
      from pg_index i join pg_class c on c.oid = i.indrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and i.indisprimary and c.relname not in ('accounts', 'schema_migrations', 'worker_heartbeats')`
    assert.ok(rows.length >= 15)
    for (const r of rows) assert.equal(r.first, 'account_id', r.table)
  } finally {
    await sql.end()
    await db.drop()
  }
})
