import type { PendingQuery, Row } from 'postgres'
import type { Tx } from '../../db/client.ts'

// One messageId received both as a track (a tracked event) and as another message (a Segment
// message) is kept once: the staged side that another table received earlier goes, staged row and
// stored row, as if never received. Both sides run this probe, each from its own staged table.
// Probed row by row (OFFSET 0 keeps the probe a subplan): a hash of the other table was the other
// plan. The staged rows are read through a materialized CTE: Citus refuses a subquery on a
// distributed table correlated to a coordinator table, but not to a CTE's result.
type TwinSide = {
  staged: 'stage_seg' | 'stage_events'
  // Which staged rows take part.
  probed: PendingQuery<Row[]>
  stored: 'segment_messages' | 'tracking_events'
  // The table whose earlier row wins, and whether a tie wins too (the track wins a tie).
  other: 'segment_messages' | 'tracking_events'
  tieLoses: boolean
  // Bounds the stored rows' delete where the caller's range bounds their update.
  within: PendingQuery<Row[]>
}

// Returns how many stored rows went.
export const dropLaterTwins = async (tx: Tx, accountId: number, side: TwinSide) => {
  const earlier = side.tieLoses ? tx`<=` : tx`<`
  const [{ n }] = await tx`
    with s as materialized (
      select id, message_id from ${tx(side.staged)} where ${side.probed}
    ), dup as (
      select s.id from s where exists (
        select 1 from ${tx(side.other)} o where o.account_id = ${accountId}
          and o.message_id = s.message_id
          and o.received_at ${earlier} (select r.received_at from ${tx(side.stored)} r
                                         where r.account_id = ${accountId} and r.id = s.id)
        offset 0)
    ), unstaged as (
      delete from ${tx(side.staged)} where id = any(array(select id from dup))
    ), gone as (
      delete from ${tx(side.stored)} r where r.account_id = ${accountId}
        and r.id = any(array(select id from dup))
        ${side.within}
      returning 1
    )
    select count(*)::int as n from gone`
  return n as number
}
