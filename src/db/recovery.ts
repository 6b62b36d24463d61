import { EventEmitter } from 'node:events'
import type { WorkerEvents } from 'graphile-worker'
import type { App } from '../context.ts'
import type { Sql } from './client.ts'
import {
  LOST_GRACE_SECONDS,
  unlockDeadWorkers,
  unlockExpiredLocks,
  unlockLostJobs,
} from './queue.ts'

// graphile-worker 0.17 frees the jobs of a worker that died without unlocking them (SIGKILL, a
// lost machine) only after 4 hours. Every worker process therefore writes a heartbeat for its
// pool and worker ids (jobs are locked by the pool id when the local queue is on, by the worker
// id otherwise), and every process unlocks the jobs of ids whose heartbeat has gone stale.
const HEARTBEAT_MS = 5_000
const RECOVER_MS = 10_000

const beat = (sql: Sql, ids: string[]) => sql`
  insert into worker_heartbeats (worker_id, seen_at) select unnest(${ids}::text[]), now()
  on conflict (worker_id) do update set seen_at = excluded.seen_at`

const forget = (sql: Sql, ids: string[]) =>
  sql`delete from worker_heartbeats where worker_id = any(${ids}::text[])`

// A live worker can lose track of a job too: when the database drops while it records the job's
// outcome (or while it takes the job), graphile-worker leaves the job and its queue locked by
// a pool that still beats, and the account's whole queue waits. So each process releases the
// locks held under its own ids by jobs it is not running: never one between `job:start` and
// `job:complete` (that would run it twice at once), nor one whose outcome may still be on its
// way (finished less than the grace ago), nor a lock younger than the grace (a job taken whose
// `job:start` is still to come). graphile-worker records a failure only under the lock it took,
// so a failure recorded late changes nothing once the lock is released; a success recorded late
// deletes the job, which then ran once more after its first run, as after a crash. The statements
// that release locks: db/queue.ts.

// Pass `events` to graphile-worker's run(); call recover() once it has started and stop() once
// the runner has stopped (its jobs finished, so no lock of ours can be taken for a dead one).
export const startRecovery = (app: App) => {
  const events = new EventEmitter() as WorkerEvents
  const ids = new Set<string>()
  events.on('pool:create', ({ workerPool }) => {
    ids.add(workerPool.id)
  })
  events.on('worker:create', ({ worker }) => {
    ids.add(worker.workerId)
  })
  // The jobs this process runs, and when each of the others it ran ended (kept for the grace).
  const active = new Set<string>()
  const ended = new Map<string, number>()
  events.on('job:start', ({ job }) => {
    active.add(job.id)
  })
  events.on('job:complete', ({ job }) => {
    active.delete(job.id)
    ended.set(job.id, Date.now())
  })
  const busy = () => {
    for (const [id, at] of ended) if (at < Date.now() - LOST_GRACE_SECONDS * 1000) ended.delete(id)
    return [...active, ...ended.keys()]
  }
  let running: Promise<unknown> = Promise.resolve()
  const timers: NodeJS.Timeout[] = []
  // A failed round (database away) is simply tried again at the next tick.
  const every = (ms: number, fn: () => Promise<unknown>) => {
    const tick = () => {
      running = running
        .then(fn)
        .catch((err) =>
          app.log('warn', 'worker recovery failed', { error: String(err?.message ?? err) }),
        )
      return running
    }
    timers.push(setInterval(tick, ms).unref())
    return tick
  }
  // With the heartbeat, as it concerns this process's ids only: a lost job waits at most the grace
  // and one beat once the database is back.
  const heartbeat = every(HEARTBEAT_MS, async () => {
    if (!ids.size) return
    await beat(app.sql, [...ids])
    const lost = await unlockLostJobs(app.sql, [...ids], busy())
    if (lost) app.log('warn', 'unlocked jobs this worker no longer runs', { locks: lost })
  })
  const recover = every(RECOVER_MS, async () => {
    const unlocked = await unlockDeadWorkers(app.sql)
    if (unlocked.length) app.log('warn', 'unlocked jobs of dead workers', { workers: unlocked })
    const expired = await unlockExpiredLocks(app.sql, app.config.jobLockTimeoutSeconds)
    if (expired) app.log('warn', 'unlocked expired job locks', { locks: expired })
  })
  return {
    events,
    recover: async () => {
      await heartbeat()
      await recover()
    },
    stop: async () => {
      for (const t of timers) clearInterval(t)
      await running
      await forget(app.sql, [...ids]).catch(() => {})
    },
  }
}
