import type { Sql, Tx } from './client.ts'
import { analyzeTablesJob, type AnalyzeTablesPayload, type JobSpec } from './jobs.ts'

// Bulk uploads grow the record and snapshot tables far faster than autovacuum re-analyzes them (at
// most once a minute). With statistics of a much smaller table the planner takes an account's rows
// for a handful and reads them all to find one upload's records, in the merge and in scoring. So an
// upload that leaves a table at over twice the pages it had when last analyzed adds this job, which
// analyzes it. The file size is read, not pg_stat's counters, which backends busy with one
// upload after another flush only now and then.
const MIN_PAGES = 100

const staleTables = (sql: Sql | Tx, tables: string[]) => sql`
  select c.relname from pg_class c
  where c.relnamespace = current_schema()::regnamespace and c.relname = any(${tables})
    and pg_relation_size(c.oid) / current_setting('block_size')::int > greatest(2 * c.relpages, ${MIN_PAGES})`

export const analyzeJobs = async (tx: Tx, tables: string[]): Promise<JobSpec[]> =>
  (await staleTables(tx, tables)).length ? [analyzeTablesJob(tables)] : []

export const analyzeTables = async (sql: Sql, payload: AnalyzeTablesPayload) => {
  for (const { relname } of await staleTables(sql, payload.tables)) await sql`analyze ${sql(relname as string)}`
}
