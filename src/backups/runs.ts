import type { Sql } from '../db/client.ts'

export type Origin = 'schedule' | 'api'

export interface Run {
  origin: Origin
  started_at: Date
  file?: string
  bytes?: number
  error?: string
}

export const recordRun = (sql: Sql, run: Run) =>
  sql`insert into backup_runs (origin, started_at, file, bytes, error)
    values (${run.origin}, ${run.started_at}, ${run.file ?? null}, ${run.bytes ?? null}, ${run.error ?? null})`.then(
    () => undefined,
  )

// For /metrics: when the last successful backup ended and its size, and how many have failed.
export const backupStats = async (sql: Sql) => {
  const [row] = await sql<{ last_success: number | null; bytes: number | null; failures: number }[]>`
    select (select extract(epoch from finished_at)::float8 from backup_runs where error is null
        order by finished_at desc limit 1) as last_success,
      (select bytes from backup_runs where error is null order by finished_at desc limit 1) as bytes,
      (select count(*)::int from backup_runs where error is not null) as failures`
  return row
}
