import type { Sql, Tx } from './client.ts'

// graphile-worker's own tables, read or changed by the service: the one file besides db/jobs.ts
// (which adds the jobs) that names its schema (the architecture test holds it). Most statements
// run inside the caller's transaction, beside the rows they concern, which is why they are SQL here
// rather than WorkerUtils calls (those take a connection of their own). graphile-worker 0.17's
// public view `jobs` does not show payloads, hence the private tables where a payload matters.
export const WORKER_SCHEMA = 'graphile_worker'

// A job attempt that failed was its last: graphile-worker will not run the job again.
export const lastAttempt = (job: { attempts: number; max_attempts: number }) =>
  job.attempts >= job.max_attempts

// The migration level of graphile-worker's schema (0: none), as a scalar subquery.
export const workerMigration = (tx: Sql | Tx) =>
  tx`(select coalesce(max(id), 0) from graphile_worker.migrations)`

// Jobs still to run (or retry), by task: the query's columns are `label` (the task) and `n`.
export const waitingJobsByTask = (sql: Sql | Tx) => sql`
  select task_identifier as label, count(*)::int as n from graphile_worker.jobs
  where locked_at is null and attempts < max_attempts group by task_identifier`

// The job of this key that waits to run (not locked by a worker), as a query yielding 1 or no row.
export const availableJob = (sql: Sql | Tx, key: string) => sql`
  select 1 from graphile_worker._private_jobs where key = ${key}::text and is_available`

// The job that `queue` runs after the running job `jobId`, by graphile-worker's order (priority,
// then run_at), while no job of another queue runs: a job that does its successor's work beside
// its own (uploads/process.ts) then takes capacity that no other queue waits for. graphile-worker
// reads the queues table whole for every job it takes, as this does.
export const nextOfQueue = (sql: Sql | Tx, queue: string, jobId: string) => sql<
  { task: string; payload: unknown }[]
>`
  select t.identifier as task, j.payload
  from graphile_worker._private_job_queues q
    join graphile_worker._private_jobs j on j.job_queue_id = q.id
    join graphile_worker._private_tasks t on t.id = j.task_id
  where q.queue_name = ${queue} and j.id <> ${jobId}::bigint and j.is_available
    and j.run_at <= now()
    and not exists (select from graphile_worker._private_job_queues o
      where o.locked_at is not null and o.queue_name <> ${queue})
  order by j.priority, j.run_at, j.id
  limit 1`

// The job of this key that waits, runs or will retry: its lock and when it runs.
export const pendingJob = (sql: Sql | Tx, key: string) => sql`
  select locked_at, run_at from graphile_worker.jobs where key = ${key} and attempts < max_attempts`

// The waiting jobs of one account's task whose payload's `field` is `value` are removed
// (complete_jobs leaves a running one alone).
export const removeWaitingJobs = (
  tx: Sql | Tx,
  task: string,
  accountId: number,
  field: string,
  value: number,
) => tx`
  select graphile_worker.complete_jobs(array(
    select j.id from graphile_worker._private_jobs j
      join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = ${task} and j.payload->>'account_id' = ${String(accountId)}
      and j.payload->>${field}::text = ${String(value)}))`

// After a restore, jobs locked at the backup were in flight in the backed-up processes: free
// at once, with an attempt left (tasks are idempotent, as graphile-worker's at-least-once
// asks). A keyed job replaced while it ran was given max_attempts by add_job, which would
// leave it queued forever.
export const releaseRestoredJobs = async (tx: Tx) => {
  await tx`update graphile_worker._private_jobs
    set locked_at = null, locked_by = null, attempts = least(attempts,
      greatest(max_attempts - 1, 0))
    where locked_at is not null`
  await tx`update graphile_worker._private_job_queues set locked_at = null, locked_by = null
    where locked_at is not null`
}

// The locks of dead workers (db/recovery.ts). An id without any heartbeat row belongs to a process
// that died before its first heartbeat or to a worker that does not run this recovery; it is only
// presumed dead after a much longer lock. Queue locks matter as much as job locks: a locked queue
// holds back all of an account's uploads. Returns the ids whose locks were released.
export const unlockDeadWorkers = async (sql: Sql): Promise<string[]> => {
  const [{ ids }] = await sql<{ ids: string[] }[]>`
    with holders as (
      select locked_by as id, min(locked_at) as since from graphile_worker.jobs
      where locked_by is not null group by locked_by
      union all
      select locked_by, min(locked_at) from graphile_worker._private_job_queues
      where locked_by is not null group by locked_by
    ), dead as (
      select distinct h.id from holders h left join worker_heartbeats b on b.worker_id = h.id
      where b.seen_at < now() - interval '30 seconds'
         or (b.worker_id is null and h.since < now() - interval '30 minutes')
    )
    select ids, graphile_worker.force_unlock_workers(ids)
      from (select array(select id from dead) as ids) d`
  await sql`delete from worker_heartbeats where seen_at < now() - interval '1 hour'`
  return ids
}

// The locks held under `ids` (this process's) by jobs it does not run (`busy`: running, or ended
// within the grace), and older than the grace (db/recovery.ts says why).
export const LOST_GRACE_SECONDS = 10
export const unlockLostJobs = async (sql: Sql, ids: string[], busy: string[]) => {
  const [{ jobs, queues }] = await sql<{ jobs: number; queues: number }[]>`
    with j as (
      update graphile_worker._private_jobs set locked_at = null, locked_by = null
      where locked_by = any(${ids}::text[]) and id <> all(${busy}::bigint[])
        and locked_at < now() - make_interval(secs => ${LOST_GRACE_SECONDS})
      returning 1
    ), q as (
      update graphile_worker._private_job_queues q set locked_at = null, locked_by = null
      where locked_by = any(${ids}::text[]) and
        locked_at < now() - make_interval(secs => ${LOST_GRACE_SECONDS})
        and not exists (
          select from graphile_worker._private_jobs b where b.job_queue_id = q.id
            and b.id = any(${busy}::bigint[]))
      returning 1
    )
    select (select count(*)::int from j) as jobs, (select count(*)::int from q) as queues`
  return jobs + queues
}

// Locks older than the bound (far above any job's run time) are released in any case, whoever holds
// them: the last resort for a worker that runs no such check of its own.
export const unlockExpiredLocks = async (sql: Sql, seconds: number): Promise<number> => {
  const [{ jobs, queues }] = await sql<{ jobs: number; queues: number }[]>`
    with j as (
      update graphile_worker._private_jobs set locked_at = null, locked_by = null
      where locked_at < now() - make_interval(secs => ${seconds}) returning 1
    ), q as (
      update graphile_worker._private_job_queues set locked_at = null, locked_by = null
      where locked_at < now() - make_interval(secs => ${seconds}) returning 1
    )
    select (select count(*)::int from j) as jobs, (select count(*)::int from q) as queues`
  return jobs + queues
}
