import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate, migrations } from '../src/db/migrate.ts'
import { freshDatabase, GLOBAL_TABLES } from './helpers/db.ts'
import { createAccount } from '../src/accounts/accounts.ts'
import { foldItems } from '../src/uploads/fold.ts'
import { processUpload } from '../src/uploads/process.ts'

test('migrations apply once, in order, and a second run is a no-op', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    const first = await migrate(sql, db.url)
    assert.deepEqual(
      first,
      migrations().map((m) => m.name),
    )
    assert.ok(first.length >= 1 && first.every((n, i, a) => i === 0 || a[i - 1] < n))
    const tables = await sql`select count(*)::int as n from information_schema.tables
        where table_schema = 'public'`
    assert.deepEqual(await migrate(sql, db.url), [])
    assert.deepEqual(
      await sql`select count(*)::int as n from information_schema.tables
        where table_schema = 'public'`,
      tables,
    )
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
      select c.relname as table, (select a.attname from pg_attribute a where a.attrelid = c.oid
        and a.attnum = i.indkey[0]) as first
      from pg_index i join pg_class c on c.oid = i.indrelid
        join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and i.indisprimary
        and c.relname <> all(${GLOBAL_TABLES})`
    assert.ok(rows.length >= 15)
    for (const r of rows) assert.equal(r.first, 'account_id', r.table)
  } finally {
    await sql.end()
    await db.drop()
  }
})

// A database as the migrations before `name` left it.
const migratedBefore = (sql: ReturnType<typeof connect>, name: string) =>
  sql.begin(async (tx) => {
    await tx`create table schema_migrations (name text primary key,
      applied_at timestamptz not null default now())`
    for (const m of migrations().filter((m) => m.name < name)) {
      await tx.unsafe(m.sql)
      await tx`insert into schema_migrations (name) values (${m.name})`
    }
  })

// Accounts A and B as the version before `before` left them, each with 3 customers and a contact
// of each; `rows` adds to them in the same statement (after CTEs c, the customers, and k, the
// contacts, each with account_id and service_id).
const seedBefore = async (sql: Sql, before: string, rows: (id: number) => ReturnType<Sql>) => {
  await migratedBefore(sql, before)
  for (const name of ['A', 'B']) {
    const { id } = await createAccount(sql, { name, source_of_truth: 'API' })
    await sql`
      with c as (
        insert into customers (account_id, external_id) select ${id}, ${name} || '-c' || n
          from generate_series(1, 3) n
        returning account_id, service_id
      ), k as (
        insert into contacts (account_id, external_id, customer_id)
          select account_id, ${name} || '-k' || service_id, service_id from c
        returning account_id, service_id
      ) ${rows(id)}`
  }
}

// Every row of each table (by its record's key) holds its record's external id, and the
// column is NOT NULL.
const assertCopied = async (sql: Sql, count: number, tables: [string, string, string][]) => {
  for (const [table, records, key] of tables) {
    const rows = await sql`
      select x.external_id as copied, r.external_id from ${sql(table)} x
      left join ${sql(records)} r on r.account_id = x.account_id and r.service_id = x.${sql(key)}`
    assert.equal(rows.length, count, table)
    for (const row of rows) assert.equal(row.copied, row.external_id, table)
    const [column] =
      await sql`select is_nullable from information_schema.columns where table_name = ${table}
      and column_name = 'external_id'`
    assert.equal(column.is_nullable, 'NO', table)
  }
}

test('an upgrade gives the tag links of existing records their external ids', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await seedBefore(
      sql,
      '010',
      (id) => sql`
        , t as (
          insert into tags (account_id, title) values (${id}, 'red'), (${id}, 'blue')
            returning account_id, id
        ), ct as (
          insert into customer_tags (account_id, customer_id, tag_id)
            select c.account_id, c.service_id, t.id
            from c cross join t
        )
        insert into contact_tags (account_id, contact_id, tag_id)
          select k.account_id, k.service_id, t.id
          from k cross join t`,
    )
    assert.deepEqual(
      await migrate(sql, db.url),
      migrations()
        .filter((m) => m.name >= '010')
        .map((m) => m.name),
    )
    await assertCopied(sql, 12, [
      ['customer_tags', 'customers', 'customer_id'],
      ['contact_tags', 'contacts', 'contact_id'],
    ])
  } finally {
    await sql.end()
    await db.drop()
  }
})

test('an upgrade gives the score rows of existing records their external ids', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await seedBefore(
      sql,
      '020',
      () => sql`
        , cs as (
          insert into customer_scores (account_id, customer_id, engagementscore)
            select account_id, service_id, 5 from c
        )
        insert into contact_scores (account_id, contact_id, engagementscore)
          select account_id, service_id, 5 from k`,
    )
    await migrate(sql, db.url)
    await assertCopied(sql, 6, [
      ['customer_scores', 'customers', 'customer_id'],
      ['contact_scores', 'contacts', 'contact_id'],
    ])
  } finally {
    await sql.end()
    await db.drop()
  }
})

// Items as uploads stored them before sql/053: as sent, duplicates and all.
const RAW_CUSTOMERS = [
  {
    external_id: 'c1',
    name: 'First',
    owner_email: 'owner@a.test',
    attributes: { country: 'US', has_sso: false },
    metrics: [
      { date: '2026-02-01', logins: 1, seats: null },
      { date: '2026-01-01', logins: 5, seats: 3 },
    ],
  },
  { external_id: 'c2', name: 'Other' },
  {
    external_id: 'c1',
    name: 'Second',
    owner_email: null,
    attributes: { has_sso: true, country: null },
    metrics: [{ date: '2026-02-01', logins: 2, nps: 9 }],
  },
]
const RAW_CONTACTS = [
  { customer_external_id: 'c1', contact_external_id: 'k1', contact_name: 'One' },
  {
    customer_external_id: 'c2',
    contact_external_id: 'k1',
    contact_name: 'Moved',
    metrics: [{ date: '2026-01-01', seen: 1 }],
  },
]

// What the request stores of its fold (objects without a prototype become plain ones).
const asStored = (records: unknown) => JSON.parse(JSON.stringify(records))
// The fold's keys that the request leaves out where SQL writes a null.
const withoutNulls = (records: Record<string, unknown>[]) =>
  records.map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== null)))

test('an upgrade folds the items of uploads received before as a request now does', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await migrate(
      sql,
      db.url,
      migrations().filter((m) => m.name < '053'),
    )
    const { id } = await createAccount(sql, { name: 'A', source_of_truth: 'API' })
    const uploads = await sql`
      insert into uploads (account_id, kind, source, items, item_count)
      values (${id}, 'customers', 'API', ${sql.json(RAW_CUSTOMERS)}, 3),
        (${id}, 'contacts', 'API', ${sql.json(RAW_CONTACTS)}, 2),
        (${id}, 'customers', 'API', null, 0)
      returning id, kind`
    await migrate(sql, db.url)
    const stored = await sql`select items from uploads where account_id = ${id} order by id`
    assert.deepEqual(withoutNulls(stored[0].items), asStored(foldItems('customers', RAW_CUSTOMERS)))
    assert.deepEqual(withoutNulls(stored[1].items), asStored(foldItems('contacts', RAW_CONTACTS)))
    assert.equal(stored[2].items, null)
    // And the folded upload merges as the raw one did: later items win, nulls clear.
    await sql.begin((tx) => processUpload(tx, id, uploads[0].id))
    const [c1] = await sql`select name, attributes, metrics from customers
      where account_id = ${id} and external_id = 'c1'`
    assert.deepEqual(
      { ...c1 },
      {
        name: 'Second',
        attributes: { has_sso: true },
        metrics: { logins: 2, seats: 3, nps: 9 },
      },
    )
  } finally {
    await sql.end()
    await db.drop()
  }
})
