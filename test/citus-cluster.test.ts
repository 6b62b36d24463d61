// Citus only (test/run.ts runs it in the Citus pass): what `migrate` makes of the schema
// on a cluster.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { connect } from '../src/db/client.ts'
import { migrate, migrations } from '../src/db/migrate.ts'
import { clusterFromEnv } from './helpers/citus.ts'
import { freshDatabase } from './helpers/db.ts'

// The tables of docs/operations.md's "Tables on Citus" list, each with how it is placed.
const documented = () => {
  const text = readFileSync('docs/operations.md', 'utf8')
  const section = text.slice(text.indexOf('### Tables on Citus'))
  const rows = section
    .slice(0, section.indexOf('\n#', 5))
    .matchAll(/^\| `(\w+)` \| (\w+) \| (.+) \|$/gm)
  return new Map([...rows].map((r) => [r[1], { placement: r[2], reason: r[3] }]))
}

test('migrate distributes every tenant table by account_id in one co-location group', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await migrate(sql, db.url)
    const tables = await sql`
      select c.relname as name, p.partmethod as method, p.repmodel as model,
        p.colocationid as group,
        column_to_column_name(p.logicalrelid, p.partkey) as key,
        exists(select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'account_id')
          as tenant
      from pg_class c left join pg_dist_partition p on p.logicalrelid = c.oid
      where c.relnamespace = 'public'::regnamespace and c.relkind = 'r' order by 1`
    const docs = documented()
    const tenant = tables.filter((t) => t.tenant)
    assert.ok(tenant.length >= 30, `${tenant.length} tenant tables`)
    for (const t of tenant) assert.deepEqual([t.name, t.method, t.key], [t.name, 'h', 'account_id'])
    assert.equal(new Set(tenant.map((t) => t.group)).size, 1)
    // A shard move replicates the whole group logically, which no unlogged table can take part in.
    const unlogged =
      await sql`select relname from pg_class where relnamespace = 'public'::regnamespace
      and relpersistence = 'u' and relname = any(${tenant.map((t) => t.name)})`
    assert.deepEqual([...unlogged], [])
    // Everything else is a reference table or stays on the coordinator, each with its reason.
    for (const t of tables.filter((t) => !t.tenant)) {
      const placement =
        t.method === 'n' && t.model === 't' ? 'reference' : t.method ? 'other' : 'coordinator'
      assert.equal(docs.get(t.name)?.placement, placement, t.name)
    }
    assert.equal(docs.get('accounts')?.placement, 'reference')
    const [{ n }] = await sql`select count(*)::int as n from pg_dist_partition
      where logicalrelid::text like 'graphile_worker.%'`
    assert.equal(n, 0)

    // Every worker holds shards of the group.
    const workers = clusterFromEnv()!.slice(1)
    const held = await sql`select nodeport as port, count(*)::int as shards from citus_shards
      where citus_table_type = 'distributed' group by 1`
    assert.deepEqual(held.map((h) => h.port).sort(), workers.map((w) => w.port).sort())
    for (const h of held) assert.ok(h.shards >= tenant.length, `${h.port}: ${h.shards}`)

    // A table a later migration creates joins the group at the migrate that creates it; the next
    // file declares its foreign keys (docs/operations.md). A second migrate changes nothing.
    const later = [
      ...migrations(),
      {
        name: '998_later.sql',
        sql: `create table later_things (account_id bigint not null,
          id bigint generated always as identity, customer_id bigint not null, primary key (account_id, id))`,
      },
      {
        name: '999_later_key.sql',
        sql: `alter table later_things add foreign key (account_id) references accounts (id);
          alter table later_things add foreign key (account_id, customer_id)
            references customers (account_id, service_id)`,
      },
    ]
    assert.deepEqual(await migrate(sql, db.url, later), ['998_later.sql', '999_later_key.sql'])
    assert.deepEqual(await migrate(sql, db.url, later), [])
    const [placed] = await sql`select partmethod, colocationid from pg_dist_partition
      where logicalrelid = 'later_things'::regclass`
    assert.deepEqual(placed, { partmethod: 'h', colocationid: tenant[0].group })
    const keys =
      await sql`select conname from pg_constraint where conrelid = 'later_things'::regclass
      and contype = 'f' order by 1`
    assert.equal(keys.length, 2)
  } finally {
    await sql.end()
    await db.drop()
  }
})
