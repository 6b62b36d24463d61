import type { Sql, Tx } from '../../db/client.ts'
import { type ApplyTask, applyJobKey, TASKS } from '../../db/jobs.ts'
import { xactLock } from '../../db/locks.ts'

// A per-account cursor over an append-only table of an intake's (the tracker's tracking_events,
// with tracking_cursors, or the relay's segment_messages, with segment_cursors): every row of
// the account with an id below `applied_below` is done for good, so an apply job reads its next
// rows through the primary key from there, not through an index naming their status. The cursor
// moves past an id once no transaction that may still insert a smaller one runs: a batch notes the
// sequence's last id and the transactions holding its lock (`check_upto`, `check_vxids`), and a
// later batch that finds none running settles the check (kept open until then, never starved). A
// cursor row read before the account lock only costs time: it never moves back.
type Rows = 'tracking_events' | 'segment_messages'
const CURSORS = {
  tracking_events: 'tracking_cursors',
  segment_messages: 'segment_cursors',
} as const
// The rows each apply job reads.
const ROWS = {
  [TASKS.applyEvents]: 'tracking_events',
  [TASKS.applyRelay]: 'segment_messages',
} as const

// The ids of the account's rows still waiting for its apply job: 'received' at or past its cursor
// ('received' below it means applied). The ingest status counts them; tests and benchmarks wait for
// none. `what` is the select list (their ids unless told).
export const waitingSql = (
  sql: Sql | Tx,
  rows: Rows,
  accountId: number,
  what: ReturnType<Sql> = sql`id`,
) => sql`
  select ${what} from ${sql(rows)} where account_id = ${accountId} and status = 'received'
    and id >= coalesce((select applied_below from ${sql(CURSORS[rows])}
      where account_id = ${accountId}), 0)`

export interface Cursor {
  task: ApplyTask
  accountId: number
  below: number
  open: boolean
  settled: number | null
  last_id: number
}

// The account's apply lock (named as the job's key), taken in the statement that reads the
// sequence's last id. The account's queue should already run its jobs one at a time, but
// graphile-worker 0.17 with a localQueue hands several jobs of one named queue to workers at once
// (graphile/worker#621): two batches of one account would then stage the same rows and deadlock
// on the same records. The lock, the sequence and pg_locks are the coordinator's on Citus, the
// cursor row a worker's: a statement joining them there ran on the worker, which has neither the
// ids handed out nor the transactions holding them. So the cursor row is read in a statement of
// its own, after the lock.
export const lockAndReadCursor = async (
  tx: Tx,
  task: ApplyTask,
  accountId: number,
): Promise<Cursor> => {
  const rows = ROWS[task]
  const [{ last_id }] = await tx`
    select ${xactLock(tx, applyJobKey(task, accountId))},
      coalesce(pg_sequence_last_value(pg_get_serial_sequence(${rows}, 'id')::regclass),
        0) as last_id`
  const [row] = await tx`
    select applied_below, check_upto, check_vxids from ${tx(CURSORS[rows])}
      where account_id = ${accountId}`
  const [{ running }] = await tx`
    select exists (select 1 from pg_locks l where
      l.virtualtransaction = any(${row?.check_vxids ?? []}::text[]))
      as running`
  const upto = (row?.check_upto ?? null) as number | null
  return {
    task,
    accountId,
    below: (row?.applied_below ?? 0) as number,
    open: upto !== null && running,
    settled: running ? null : upto,
    last_id: last_id as number,
  }
}

// Read after the sequence's last id: a transaction that took an id up to it still holds the lock.
const sequenceHolders = async (tx: Tx, rows: Rows) =>
  (
    await tx`
    select array(select l.virtualtransaction from pg_locks l where l.locktype = 'relation'
      and l.relation = pg_get_serial_sequence(${rows}, 'id')::regclass) as vxids`
  )[0].vxids as string[]

// Where the cursor may move after a batch that read rows in id order up to `last`: with a settled
// check, past the ids up to it that the batch read past (all of them unless the batch was full, or
// stopped short of rows that wait: none when it read none).
export const nextBelow = (cursor: Cursor, full: boolean, last: number | null) => {
  const { settled } = cursor
  if (settled === null || (full && last === null)) return 0
  return (full ? Math.min(settled, last as number) : settled) + 1
}

export interface Move {
  below: number
  next: { upto: number; vxids: string[] } | null
}

// The statement moving the cursor (it never moves back) and noting a new check when one is due.
export const moveCursor = (tx: Tx, { task, accountId }: Cursor, move: Move) => {
  const cursors = CURSORS[ROWS[task]]
  return tx`
  insert into ${tx(cursors)} (account_id, applied_below, check_upto, check_vxids)
  values (${accountId}, ${move.below}, ${move.next?.upto ?? null}::bigint,
    ${move.next?.vxids ?? null}::text[])
  on conflict (account_id) do update set
    applied_below = greatest(${tx(cursors)}.applied_below, excluded.applied_below),
    check_upto = coalesce(excluded.check_upto, ${tx(cursors)}.check_upto),
    check_vxids = coalesce(excluded.check_vxids, ${tx(cursors)}.check_vxids)`
}

// The check a batch notes when none is open: the sequence's last id, and who may still
// commit below it.
export const nextCheck = async (tx: Tx, cursor: Cursor) =>
  cursor.open ? null : { upto: cursor.last_id, vxids: await sequenceHolders(tx, ROWS[cursor.task]) }
