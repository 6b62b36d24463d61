import type { Sql, Tx } from '../db/client.ts'

export interface JobSpec {
  task: string
  payload: Record<string, unknown>
  queue?: string
  runAt?: Date
  maxAttempts?: number
  jobKey?: string
}

// Jobs are always added with SQL on the caller's connection, so they commit or roll back with
// the data they concern. One statement for any number of jobs (add_jobs is ~20x add_job).
export const addJobs = (tx: Sql | Tx, specs: JobSpec[]) => specs.length === 0 ? Promise.resolve() : tx`
  select graphile_worker.add_jobs(array(
    select row(s->>'task', s->'payload', s->>'queue', (s->>'runAt')::timestamptz,
               (s->>'maxAttempts')::int, s->>'jobKey', null, null)::graphile_worker.job_spec
    from json_array_elements(${tx.json(specs as never)}::json) s))`.then(() => undefined)

export const accountQueue = (accountId: number) => `account:${accountId}`
