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

// An account's uploads, tracking and aggregation run one at a time on its queue, in order; its
// scoring on a second queue beside them, so that an upload waits for the uploads before it but not
// for their scoring. Writers on both lock the records they change in service_id order first
// (src/db/locks.ts), so the two never deadlock.
export const accountQueue = (accountId: number) => `account:${accountId}`
export const scoringQueue = (accountId: number) => `scoring:${accountId}`
