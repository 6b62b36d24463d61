// Citus only (test/run.ts runs it in the Citus pass): the statistics rules of src/db/analyze.ts
// read the shards, not the coordinator's empty shell of each table.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { analyzeJobs, refreshStatistics } from '../src/db/analyze.ts'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { freshDatabase } from './helpers/db.ts'

// The rows the planner knows customers to hold, summed over its shards (-1 when never analyzed).
const shardTuples = async (sql: Sql) =>
  (
    await sql`select sum(greatest(r.result::float8, 0))::int as n
      from run_command_on_shards('customers', $$select reltuples from pg_class where oid = '%s'::regclass$$) r`
  )[0].n as number

const addCustomers = (sql: Sql, accountId: number, from: number, to: number, name = 'x') => sql`
  insert into customers (account_id, external_id, name)
  select ${accountId}, 'c' || g, ${name} from generate_series(${from}::int, ${to}::int) g`

test('an account is analyzed once its rows outgrow its estimate; the table-wide rule reads no shard', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await migrate(sql, db.url)
    const [{ id }] =
      await sql`insert into accounts (name, tracker_key) values ('a', 'k') returning id`
    await addCustomers(sql, id, 1, 2000)
    await refreshStatistics(sql, id, 'customer')
    assert.equal(await shardTuples(sql), 2000)
    // The shard's estimate knows the account's rows now: a few more analyze nothing (the
    // coordinator's estimate, always 0, analyzed at every scoring).
    await addCustomers(sql, id, 2001, 2010)
    await refreshStatistics(sql, id, 'customer')
    assert.equal(await shardTuples(sql), 2000)
    assert.deepEqual(await sql.begin((tx) => analyzeJobs(tx, ['customers'])), [])
    // The table-wide rule reads no shard (each a connection of its own, at every upload): a table
    // grown sixteenfold is no job. The shard's planner scales its counts to the shard's size, so
    // the account's estimate follows the rows without an analyze.
    await addCustomers(sql, id, 2011, 32010, 'x'.repeat(200))
    assert.deepEqual(await sql.begin((tx) => analyzeJobs(tx, ['customers'])), [])
    const [plan] = await sql`explain (format json) select from customers where account_id = ${id}`
    const task = plan['QUERY PLAN'][0].Plan['Distributed Query'].Job.Tasks[0]
    const estimate = Number(task['Remote Plan'][0][0].Plan['Plan Rows'])
    assert.ok(estimate >= 32010 / 2, `the shard's estimate ${estimate} of 32010`)
  } finally {
    await sql.end()
    await db.drop()
  }
})
