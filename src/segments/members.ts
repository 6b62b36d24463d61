// Segment membership (docs/design.md, "Segments"): each segment's matching customers recomputed
// set-based in SQL into segment_members, one row per stay (entered_at, exited_at), by a job that
// every change of customer data enqueues in its own transaction.
import type { App } from '../context.ts'
import { budgeted } from '../db/budget.ts'
import type { Tx } from '../db/client.ts'
import type { AccountPayload } from '../db/jobs.ts'
import { Refusal, refuse } from '../errors.ts'
import type { EventItem } from '../webhooks/events.ts'
import { enqueueEvent } from '../webhooks/outbox.ts'
import { matchQuery, savedOf } from './segments.ts'

interface MembershipChange {
  segment_id: number
  // Customers' service ids, ascending.
  entered: number[]
  exited: number[]
}

// One segment brought up to date in the caller's transaction: customers that match and have no
// open stay enter (a new row), open stays of customers that no longer match (or no longer exist)
// end (exited_at). What changed is returned, so that an events module can write segment.entered
// and segment.exited messages in the same transaction. The segment row is locked, so that two
// recomputations of one segment never interleave; a segment deleted meanwhile is skipped (null).
// A customer's open stay is an anti-join: Citus refuses an INSERT ... SELECT whose subquery is
// correlated to a CTE's rows.
export const recomputeSegment = async (tx: Tx, accountId: number, segmentId: number) => {
  const [segment] = await tx`
    select name, body, computed_at from segments where account_id = ${accountId}
      and id = ${segmentId}
    for no key update`
  if (!segment) return null
  const match = await matchQuery(tx, accountId, savedOf(segment.body))
  const [a, s] = [match.params.length + 1, match.params.length + 2].map(
    (n) => `$${n}::text::bigint`,
  )
  const [row] = await tx.unsafe(
    `with matched as materialized (${match.text}
    ), exited as (
      update segment_members m set exited_at = now()
      where m.account_id = ${a} and m.segment_id = ${s} and m.exited_at is null
        and not exists (select 1 from matched x where x.service_id = m.customer_id)
      returning m.customer_id
    ), entered as (
      insert into segment_members (account_id, segment_id, customer_id, external_id, entered_at)
      select ${a}, ${s}, x.service_id, x.external_id, now() from matched x
        left join segment_members m on m.account_id = ${a} and m.segment_id = ${s}
          and m.customer_id = x.service_id and m.exited_at is null
      where m.customer_id is null
      returning customer_id
    ), stamped as (
      update segments set computed_at = now() where account_id = ${a} and id = ${s}
    )
    select array(select customer_id from entered order by 1) as entered,
      array(select customer_id from exited order by 1) as exited`,
    [...(match.params as string[]), String(accountId), String(segmentId)],
  )
  const change = {
    segment_id: segmentId,
    entered: row.entered,
    exited: row.exited,
  } as MembershipChange
  if (segment.computed_at !== null)
    await announce(tx, accountId, { id: segmentId, name: segment.name }, change)
  return change
}

// segment.entered and segment.exited, in the recomputation's transaction. A segment's first
// computation is its initial population, not customers entering it, and announces nothing.
const announce = async (
  tx: Tx,
  accountId: number,
  segment: { id: number; name: string },
  change: MembershipChange,
) => {
  const customers = <E extends 'segment.entered' | 'segment.exited'>(ids: number[]) => tx<
    EventItem<E>[]
  >`
    select m.customer_id as service_id, m.external_id, c.name from segment_members m
      left join customers c on c.account_id = m.account_id and c.service_id = m.customer_id
    where m.account_id = ${accountId} and m.segment_id = ${segment.id}
      and m.customer_id = any(${ids}::bigint[])
      and m.id = (select max(l.id) from segment_members l where l.account_id = ${accountId}
        and l.segment_id = m.segment_id and l.customer_id = m.customer_id)
    order by m.customer_id`
  if (change.entered.length)
    await enqueueEvent(
      tx,
      accountId,
      'segment.entered',
      await customers<'segment.entered'>(change.entered),
      {
        segment,
      },
    )
  if (change.exited.length)
    await enqueueEvent(
      tx,
      accountId,
      'segment.exited',
      await customers<'segment.exited'>(change.exited),
      { segment },
    )
}

// One segment the job cannot bring up to date (its saved search is past a limit made after it was
// saved, or ran past its budget) keeps its members as they were: it is logged and skipped, so that
// it never fails the recomputation of the account's other segments, on every retry.
const recomputedOrSkipped = (app: App, accountId: number, id: number) =>
  budgeted(app, undefined, 'segment', (tx) => recomputeSegment(tx, accountId, id)).catch((err) => {
    if (!(err instanceof Refusal && (err.status === 400 || err.status === 422))) throw err
    app.log('warn', 'segment not recomputed', {
      account: accountId,
      segment: id,
      reason: err.message,
    })
    return null
  })

// The job: every segment of the account, each in its own transaction, under the segment budget.
export const recomputeSegments = async (app: App, { account_id: accountId }: AccountPayload) => {
  const ids = await app.sql`select id from segments where account_id = ${accountId} order by id`
  let [entered, exited] = [0, 0]
  for (const { id } of ids) {
    const change = await recomputedOrSkipped(app, accountId, id)
    entered += change?.entered.length ?? 0
    exited += change?.exited.length ?? 0
  }
  return { segments: ids.length, entered, exited }
}

export const MAX_HISTORY = 1000
export const DEFAULT_HISTORY = 100

type MemberRow = {
  id: number
  customer: string
  service_id: number
  entered_at: Date
  exited_at: Date | null
}

// A segment's stays, the latest entry first: current members (exited_at null) and past ones.
export const membershipHistory = async (
  app: App,
  accountId: number,
  segmentId: number,
  { limit, after }: { limit: number; after?: number },
) => {
  const [segment] =
    await app.sql`select 1 from segments where account_id = ${accountId} and id = ${segmentId}`
  if (!segment) refuse(404, `No segment ${segmentId} in this account.`)
  const rows = await app.sql<MemberRow[]>`
    select id, external_id as customer, customer_id as service_id, entered_at, exited_at
      from segment_members
    where account_id = ${accountId} and segment_id = ${segmentId}
      and id < ${after ?? Number.MAX_SAFE_INTEGER}
    order by id desc limit ${limit + 1}`
  const results = rows.slice(0, limit).map(({ id: _id, ...stay }) => stay)
  return {
    results,
    ...(rows.length > limit && { paging: { next: { after: rows[limit - 1].id } } }),
  }
}
