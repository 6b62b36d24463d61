import type { Sql } from '../db/client.ts'

type Origin = 'schedule' | 'api'

export interface Run {
  origin: Origin
  started_at: Date
  file?: string
  bytes?: number
  error?: string
}

export const recordRun = (sql: Sql, run: Run) =>
  sql`insert into backup_runs (origin, started_at, file, bytes, error)
    values (${run.origin}, ${run.started_at}, ${run.file ?? null}, ${run.bytes ?? null},
      ${run.error ?? null})`.then(() => undefined)
