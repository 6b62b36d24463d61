import type { App } from '../../context.ts'
import type { Sql, Tx } from '../../db/client.ts'
import { type ApplyTask, applyJobKey, applyJobSql } from '../../db/jobs.ts'
import { lockHolders, sharedXactLock } from '../../db/locks.ts'
import { availableJob } from '../../db/queue.ts'
import { SQLSTATE, sqlState } from '../../db/sqlstate.ts'

// The gate between an intake and the apply job it counts on. An intake statement that finds a job
// waiting adds none, so that job must see its rows: each intake holds the gate (an advisory lock,
// shared) from before its statement's snapshot to its commit, and an apply job, once taken and
// before it reads, waits for the intakes holding the gate then: every one that may have found it
// waiting. An intake that takes the gate later finds the job taken, and adds the next. Row locks on
// the waiting job did the same, but kept graphile-worker from taking or completing it (FOR UPDATE
// SKIP LOCKED) while any intake ran, and deadlocked intakes; taking the gate exclusively held every
// new intake of the account behind the ones in flight (docs/benchmarks.md).
const gate = (task: ApplyTask, accountId: number) => `gate:${applyJobKey(task, accountId)}`

// A transaction holds the lock on its own virtual id until it ends, and a virtual id is never
// reused. The holders just read are most likely still running: the first look comes after a pause.
export const passGate = async (app: App, task: ApplyTask, accountId: number) => {
  const [{ holders }] = await lockHolders(app.sql, gate(task, accountId))
  for (let pause = 1; holders.length > 0; pause = Math.min(pause * 2, 50)) {
    await new Promise((resolve) => setTimeout(resolve, pause))
    const [{ running }] = await app.sql`
      select exists (select 1 from pg_locks where virtualtransaction = any(${holders}::text[]))
        as running`
    if (!running) return
  }
}

// Runs an intake statement behind the gate, in one transaction: the lock is sent first and the
// statement beside it without waiting, so the statement's snapshot comes after the lock.
export const throughGate = <T extends readonly unknown[]>(
  app: App,
  task: ApplyTask,
  accountId: number,
  statement: (tx: Tx) => Promise<T>,
) =>
  retryingDeadlock(() =>
    app.sql.begin(async (tx) => {
      const lock = tx`select ${sharedXactLock(tx, gate(task, accountId))}`.execute()
      const [, rows] = await Promise.all([lock, statement(tx)])
      return rows
    }),
  )

// The CTEs `waiting` and `j` of an intake statement (run through the gate): j adds the task's apply
// job when the statement's CTE `inserted` (e unless named) inserted a row and no job of its key
// waits. Reading j is what runs add_job.
export const jobUnlessWaiting = (
  sql: Sql | Tx,
  task: ApplyTask,
  accountId: number,
  inserted = 'e',
) => sql`
  waiting as (
    ${availableJob(sql, applyJobKey(task, accountId))}
  ), j as (
    select ${applyJobSql(sql, task, accountId)}
    where exists (select 1 from ${sql(inserted)}) and not exists (select 1 from waiting)
  )`

// Two intakes that both found no job waiting both add one: the later waits for the earlier's job
// row, then updates it. Two relay requests carrying the same messageIds in another order each wait
// for the other's insert: PostgreSQL aborts one with a deadlock, and as the transaction is all or
// nothing, it is simply run again.
const retryingDeadlock = async <T>(statement: () => Promise<T>, attempts = 3): Promise<T> => {
  try {
    return await statement()
  } catch (err) {
    if (sqlState(err) === SQLSTATE.DEADLOCK_DETECTED && attempts > 1)
      return retryingDeadlock(statement, attempts - 1)
    throw err
  }
}
