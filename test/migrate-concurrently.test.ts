// A migration that builds an index on an existing table does it without blocking writes: marked
// `-- migrate: concurrently`, it runs CREATE INDEX CONCURRENTLY outside a transaction, and an index
// a crash left invalid is rebuilt on retry. The same index built in an ordinary (transactional)
// migration holds writes until it commits, which the test shows too, so it can tell them apart.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { connect, type Sql } from '../src/db/client.ts'
import { checkServerVersion, migrate } from '../src/db/migrate.ts'
import { freshDatabase } from './helpers/db.ts'

let db: Awaited<ReturnType<typeof freshDatabase>>
let sql: Sql
before(async () => {
  db = await freshDatabase()
  sql = connect(db.url)
  await migrate(sql, db.url)
  await sql`create table big_writes (account_id bigint not null, n bigint not null, note text)`
  await sql`insert into big_writes select i % 7, i, md5(i::text) from generate_series(1, 2000000) i`
})
after(async () => {
  await sql.end()
  await db.drop()
})

// Writes into the table once the index build is under way, waiting at most 200 ms for a lock.
const writeDuringBuild = async (index: string, build: Promise<unknown>) => {
  for (let i = 0; ; i++) {
    const [building] = await sql`
      select 1 from pg_stat_progress_create_index p join pg_class c on c.oid = p.relid
        where c.relname = 'big_writes'`
    if (building) break
    assert.ok(i < 500, `the build of ${index} never showed`)
    await new Promise((r) => setTimeout(r, 10))
  }
  const writer = connect(db.url, { max: 1 })
  try {
    return await writer.begin(async (tx) => {
      await tx`set local lock_timeout = '200ms'`
      await tx`insert into big_writes values (1, -1, 'during the build')`
      return 'written'
    })
  } catch (err) {
    return (err as { code?: string }).code
  } finally {
    await writer.end()
    await build
  }
}

test('a concurrently marked migration keeps the table writable while its index builds', async () => {
  const file = {
    name: '900_test_concurrently.sql',
    sql:
      '-- migrate: concurrently\n-- Builds without blocking writes.\n' +
      'create index concurrently if not exists big_writes_note on big_writes (account_id, note);\n',
  }
  assert.equal(await writeDuringBuild('big_writes_note', migrate(sql, db.url, [file])), 'written')
  const [index] = await sql`select i.indisvalid from pg_index i where
      i.indexrelid = to_regclass('big_writes_note')`
  assert.equal(index.indisvalid, true)
  assert.deepEqual(
    (await sql`select name from schema_migrations where name = ${file.name}`).length,
    1,
  )
})

test('the same index in an ordinary migration holds writes (the difference the marker makes)', async () => {
  const file = {
    name: '901_test_blocking.sql',
    sql: 'create index big_writes_n on big_writes (account_id, n);\n',
  }
  assert.equal(await writeDuringBuild('big_writes_n', migrate(sql, db.url, [file])), '55P03')
})

test('an index a crash left invalid is built again on retry', async () => {
  // An invalid index of the same name, as an interrupted CONCURRENTLY build leaves it.
  await sql`create index big_writes_again on big_writes (n)`
  await sql`update pg_index set indisvalid = false where indexrelid = 'big_writes_again'::regclass`
  const file = {
    name: '902_test_retry.sql',
    sql:
      '-- migrate: concurrently\n' +
      'create index concurrently if not exists big_writes_again on big_writes (n, account_id);\n',
  }
  assert.deepEqual(await migrate(sql, db.url, [file]), [file.name])
  const [index] = await sql`
    select i.indisvalid, pg_get_indexdef(i.indexrelid) as def
    from pg_index i where i.indexrelid = to_regclass('big_writes_again')`
  assert.equal(index.indisvalid, true)
  assert.match(index.def, /\(n, account_id\)/)
})

test('a server older than PostgreSQL 15 is refused, naming both versions', () => {
  assert.throws(
    () => checkServerVersion(140011, '14.11'),
    /PostgreSQL 14\.11 is too old: the service needs PostgreSQL 15 or newer/,
  )
  assert.doesNotThrow(() => checkServerVersion(150014, '15.14'))
  assert.doesNotThrow(() => checkServerVersion(180004, '18.4'))
})
