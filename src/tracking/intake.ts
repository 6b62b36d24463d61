import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { lockHolders, sharedXactLock } from '../db/locks.ts'
import { definitionsSql } from '../catalog/properties.ts'
import { type ApplyTask, applyJobKey, applyJobSql, TASKS } from '../db/jobs.ts'
import { DATE_RULE } from '../dates.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'
import { availableJob } from '../db/queue.ts'
import { pointerToken } from '../validate.ts'
import { refuse } from '../errors.ts'

// One statement checks the account, appends every event (one JSON array text: a jsonb parameter would
// be encoded twice) and makes sure a job will apply them: a 200 means both are committed.
// add_job NOTIFYs, and PostgreSQL serializes notifying commits (docs/benchmarks.md), so a job is added
// only when none waits (jobUnlessWaiting, behind the gate). It reads graphile-worker 0.17's
// _private_jobs (test/tracking.test.ts). A date attribute's value must be a date by the one rule
// (is_iso_date); `bad` names each one that is not, and then nothing is stored.
const store = (tx: Tx, accountId: number, trackerKey: string, events: string) => tx`
  with a as (
    select tracker_key = ${trackerKey} as key_ok, cardinality(tracking_domains) > 0 as set_up
    from accounts where id = ${accountId}
  ), x as (
    select ev, i - 1 as i from jsonb_array_elements(${events}::text::jsonb) with ordinality as t(ev, i)
  ), bad as (
    select x.i, l.level, d.key
    from x cross join (values ('customer'), ('contact')) l(level)
      cross join jsonb_each(case when jsonb_typeof(x.ev->'data'->l.level) = 'object' then x.ev->'data'->l.level end) d
      join ${definitionsSql(tx, accountId)} p on p.entity = l.level and p.kind = 'attribute'
        and p.type = 'date' and p.codename = d.key
    where jsonb_typeof(d.value) = 'string' and not is_iso_date(d.value #>> '{}')
  ), e as (
    insert into tracking_events (account_id, name, occurred_at, customer_external_id, contact_external_id, data)
    select ${accountId}, x.ev->>'name', to_timestamp((x.ev->>'timestamp')::float8 / 1000),
      x.ev#>>'{identification,customer}', x.ev#>>'{identification,contact}', nullif(x.ev->'data', 'null')
    from a, x
    where a.key_ok and a.set_up and not exists (select 1 from bad)
    order by x.i
    returning id
  ), ${jobUnlessWaiting(tx, TASKS.applyEvents, accountId)}
  select a.key_ok, a.set_up, (select count(*) from j)::int as jobs, -- reading j is what runs add_job
    (select json_agg(json_build_array(i, level, key) order by i, level, key) from bad) as bad_dates
  from a`

// The gate between an intake and the apply job it counts on. An intake statement that finds a job
// waiting adds none, so that job must see its rows: each intake holds the gate (an advisory lock,
// shared) from before its statement's snapshot to its commit, and an apply job, once taken and before
// it reads, waits for the intakes holding the gate then: every one that may have found it waiting. An
// intake that takes the gate later finds the job taken, and adds the next.
// Row locks on the waiting job did the same, but kept graphile-worker from taking or completing it
// (FOR UPDATE SKIP LOCKED) while any intake ran, and deadlocked intakes; taking the gate exclusively
// held every new intake of the account behind the ones in flight (docs/benchmarks.md).
const gate = (task: ApplyTask, accountId: number) => `gate:${applyJobKey(task, accountId)}`

// A transaction holds the lock on its own virtual id until it ends, and a virtual id is never reused.
// The holders just read are most likely still running: the first look comes after a pause.
export const passGate = async (app: App, task: ApplyTask, accountId: number) => {
  const [{ holders }] = await lockHolders(app.sql, gate(task, accountId))
  for (let pause = 1; holders.length > 0; pause = Math.min(pause * 2, 50)) {
    await new Promise((resolve) => setTimeout(resolve, pause))
    const [{ running }] = await app.sql`
      select exists (select 1 from pg_locks where virtualtransaction = any(${holders}::text[])) as running`
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

// The CTEs `waiting` and `j` of an intake statement (run through the gate): j adds the task's apply job
// when the statement's CTE `inserted` (e unless named) inserted a row and no job of its key waits.
// Reading j is what runs add_job.
export const jobUnlessWaiting = (sql: Sql | Tx, task: ApplyTask, accountId: number, inserted = 'e') => sql`
  waiting as (
    ${availableJob(sql, applyJobKey(task, accountId))}
  ), j as (
    select ${applyJobSql(sql, task, accountId)}
    where exists (select 1 from ${sql(inserted)}) and not exists (select 1 from waiting)
  )`

// Two intakes that both found no job waiting both add one: the later waits for the earlier's job row,
// then updates it. Two Segment requests carrying the same messageIds in another order each wait for the
// other's insert: PostgreSQL aborts one with a deadlock, and as the transaction is all or nothing, it is
// simply run again.
const retryingDeadlock = async <T>(statement: () => Promise<T>, attempts = 3): Promise<T> => {
  try {
    return await statement()
  } catch (err) {
    if (sqlState(err) === SQLSTATE.DEADLOCK_DETECTED && attempts > 1) return retryingDeadlock(statement, attempts - 1)
    throw err
  }
}

// Appends checked events (a JSON array text, eventsToStore) and makes sure they will be applied.
// A trackerKey of another account, or an account without a tracking domain, is 403.
export const receiveEvents = async (app: App, accountId: number, trackerKey: string, events: string) => {
  const [account] = await throughGate(app, TASKS.applyEvents, accountId, (tx) =>
    store(tx, accountId, trackerKey, events),
  )
  if (!account?.key_ok) refuse(403, "The trackerKey is not the tracker key of this API key's account.")
  if (!account.set_up) refuse(403, 'Tracking is not set up for this account: add a tracking domain first.')
  const bad = (account.bad_dates ?? []) as [number, string, string][]
  if (bad.length) {
    refuse(
      400,
      'Some date attributes are not dates.',
      bad.map(([i, level, key]) => ({
        path: `/events/${i}/data/${level}/${pointerToken(key)}`,
        message: `Must be ${DATE_RULE}.`,
      })),
    )
  }
}
