import type { PendingQuery, Row } from 'postgres'
import type { Tx } from '../../db/client.ts'
import { waitingSql } from '../intake/cursor.ts'
import type { Relayed } from '../tracker/apply.ts'
import { relayApplied, relayDropped, relayReceived } from './metrics.ts'
import { dropLaterTwins } from './twins.ts'

// The relay's tracks that the tracker's apply job takes (relay/intake.ts stores those that name
// their customer as tracked events): what the relay does of them through the tracker's seam
// (`Relayed`, tracker/apply.ts; tracking/apply.ts plugs this in).

// They come after the messages received before them, so they wait from the oldest message
// still to apply.
const waitingSince = (tx: Tx, accountId: number) =>
  tx`(${waitingSql(tx, 'segment_messages', accountId, tx`min(received_at)`)})`

// A batch's, still staged or `suppressed`, counted by type like every other message, and those
// suppressed by reason.
const count = async (tx: Tx, accountId: number, suppressed: number) => {
  const [{ n }] = await tx`
    with t as (
      select (count(*) + ${suppressed})::int as n from stage_events where message_id is not null
    ), added as (
      insert into segment_counts (account_id, kind, key, count)
      select ${accountId}, kind, key, c.n
      from (select 'type', 'track', (select n from t)
            union all select 'reason', 'suppressed', ${suppressed}) c(kind, key, n)
      where c.n > 0
      on conflict (account_id, kind, key) do update
        set count = segment_counts.count + excluded.count
    )
    select n from t`
  return n as number
}

// A track whose messageId another message received before it has (relay/intake.ts deduplicates each
// table on its own) goes, staged row and tracked event, counted a duplicate; relay/apply.ts drops
// the message received after a track (twins.ts). `range` bounds the events' delete as it
// bounds their update.
const dropDuplicates = (tx: Tx, accountId: number, range: { first: number; last: number }) =>
  dropLaterTwins(tx, accountId, {
    staged: 'stage_events',
    probed: tx`message_id is not null`,
    stored: 'tracking_events',
    other: 'segment_messages',
    tieLoses: false,
    within: tx`and r.id between ${range.first} and ${range.last}`,
  })

// A suppressed track, dropped from the tracked events, is kept as a dropped message: its messageId
// still deduplicates, the ingest status lists it, and it names nobody. `rows` yields
// (message_id, occurred_at).
const dropped = (tx: Tx, accountId: number, rows: PendingQuery<Row[]>) => tx`
  insert into segment_messages (account_id, message_id, type, occurred_at, status, reason)
  select ${accountId}, g.message_id, 'track', g.occurred_at, 'dropped', 'suppressed'
    from (${rows}) g
  on conflict (account_id, message_id) do nothing
  returning 1`

// The counters of a tracker's batch's tracks, once committed.
const counted = ({
  tracks,
  suppressed,
  duplicates,
}: {
  tracks: number
  suppressed: number
  duplicates: number
}) => {
  if (duplicates > 0) relayReceived.inc({ type: 'duplicate' }, duplicates)
  relayApplied.inc({ type: 'track', outcome: 'applied' }, tracks - suppressed)
  if (suppressed === 0) return
  relayApplied.inc({ type: 'track', outcome: 'dropped' }, suppressed)
  relayDropped.inc({ reason: 'suppressed' }, suppressed)
}

export const relayTracks: Relayed = { waitingSince, dropDuplicates, dropped, count, counted }
