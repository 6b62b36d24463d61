import type { Sql, Tx } from './client.ts'
import { analyzeTablesJob, type AnalyzeTablesPayload, type JobSpec } from './jobs.ts'
import { TABLES } from './tables.ts'
import type { Entity } from '../property.ts'

// Bulk uploads grow the record and snapshot tables far faster than autovacuum re-analyzes them (at
// most once a minute). With statistics of a much smaller table the planner takes an account's rows
// for a handful and reads them all to find one upload's records, in the merge and in scoring. So an
// upload that leaves a table at over twice the pages it had when last analyzed adds this job, which
// analyzes it. The file size is read, not pg_stat's counters, which backends busy with one
// upload after another flush only now and then.
const MIN_PAGES = 100

const onCitus = async (sql: Sql | Tx) =>
  (
    await sql<{ on: boolean }[]>`
      select exists (select 1 from pg_extension where extname = 'citus') as on`
  )[0].on

// On Citus this rule reads nothing: the coordinator's table is an empty shell, and its shards'
// pages could only be read with a new connection to each shard (run_command_on_shards), at every
// upload and scoring: 100 connections a second under bench citus's load, and the machine's time
// went to starting them (docs/benchmarks.md, "Citus"). Each shard's planner scales its row counts
// to the shard's current size by itself; what goes stale is where an account's rows sit, which the
// rule for the account below reads from the shard's own plan.
const staleTables = async (sql: Sql | Tx, tables: string[]) =>
  (await onCitus(sql))
    ? []
    : sql<{ relname: string }[]>`
  select c.relname from pg_class c
  where c.relnamespace = current_schema()::regnamespace and c.relname = any(${tables})
    and pg_relation_size(c.oid) / current_setting('block_size')::int > greatest(2 * c.relpages,
      ${MIN_PAGES})`

export const analyzeJobs = async (tx: Tx, tables: string[]): Promise<JobSpec[]> =>
  (await staleTables(tx, tables)).length ? [analyzeTablesJob(tables)] : []

export const analyzeTables = async (sql: Sql, payload: AnalyzeTablesPayload) => {
  for (const { relname } of await staleTables(sql, payload.tables))
    await sql`analyze ${sql(relname)}`
}

// A small account's first upload beside a large one grows a table too little for the rule above,
// yet statistics without its rows make the planner take it for one row and choose nested loops
// over every pair of them. So a table is also stale for an account that has outgrown twice
// the planner's estimate of its rows (and MIN_ROWS), counted with a LIMIT; one expected above
// MAX_ESTIMATE is not counted.
const MIN_ROWS = 500
const MAX_ESTIMATE = 50_000

// On Citus the estimate is the shard's, in the plan of the one task the query is routed to (the
// coordinator's Custom Scan estimates nothing).
const estimatedRows = async (sql: Sql | Tx, table: string, accountId: number) => {
  const [row] =
    await sql`explain (format json) select from ${sql(table)} where account_id = ${accountId}`
  const plan = row['QUERY PLAN'][0].Plan
  const task = plan['Distributed Query']?.Job.Tasks[0]
  return Number((task ? task['Remote Plan'][0][0].Plan : plan)['Plan Rows'])
}

const outgrown = async (sql: Sql | Tx, table: string, accountId: number) => {
  const estimate = await estimatedRows(sql, table, accountId)
  if (estimate > MAX_ESTIMATE) return false
  const bound = 2 * Math.ceil(estimate) + MIN_ROWS
  const [{ n }] = await sql`
    select count(*)::int as n from (select from ${sql(table)} where account_id = ${accountId}
      limit ${bound}) s`
  return n >= bound
}

// An entity's tables that uploads, tracking and scoring grow, analyzed where stale for the account
// or grown as a whole. Run by scoring before it marks an upload scored, so that the account's
// reads plan on statistics that know its rows from its first minute. For the account alone
// only account_id is analyzed: its sample is what places the account, and the other columns'
// statistics describe the table, which it hardly changed; that skips the costly part (the jsonb
// columns of a large table). A stale table is checked again under ANALYZE's own lock: scorings
// that finish together (the uploads of one first import) then analyze it once, the later ones
// finding the statistics fresh.
export const refreshStatistics = async (sql: Sql, accountId: number, entity: Entity) => {
  const t = TABLES[entity]
  const tables = [t.records, t.snapshots, t.scores, t.tags]
  const grown = async (tx: Sql | Tx, table: string) => (await staleTables(tx, [table])).length > 0
  for (const table of tables) {
    if (!(await grown(sql, table)) && !(await outgrown(sql, table, accountId))) continue
    await sql.begin(async (tx) => {
      await tx`lock table ${tx(table)} in share update exclusive mode`
      if (await grown(tx, table)) await tx`analyze ${tx(table)}`
      else if (await outgrown(tx, table, accountId)) await tx`analyze ${tx(table)} (account_id)`
    })
  }
}
