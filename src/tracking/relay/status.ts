import { definitionsSql } from '../../catalog/properties.ts'
import type { Sql } from '../../db/client.ts'
import { closest } from '../../validate.ts'
import { waitingSql } from '../intake/cursor.ts'

// What a client developer needs to see of the account's Segment ingest: the running counts (by
// type, by reason dropped, dropped trait keys with the attribute they probably meant), the messages
// not yet applied, and the latest messages with a problem.
const LAST_ERRORS = 20

export const ingestStatus = async (sql: Sql, accountId: number) => {
  const [counts, [waiting], errors, codenames] = await Promise.all([
    sql`select kind, key, count::int as n from segment_counts where account_id = ${accountId}
      order by kind, count desc, key`,
    // Tracks that name their customer wait as tracked events, for the tracker's apply job
    // (relay/intake.ts).
    sql`select ((select count(*) from (${waitingSql(sql, 'segment_messages', accountId)}) w)
          + (select count(*) from (${waitingSql(sql, 'tracking_events', accountId)}
            and message_id is not null) t))::int
          as received,
        (select count(*) from segment_messages where account_id = ${accountId}
          and status = 'pending')::int as pending`,
    sql`select message_id, type, reason, detail, received_at from segment_messages
      where account_id = ${accountId} and reason is not null order by id desc limit ${LAST_ERRORS}`,
    sql`select entity, codename from ${definitionsSql(sql, accountId)} p where kind = 'attribute'`,
  ])
  const of = (kind: string) =>
    Object.fromEntries(counts.filter((c) => c.kind === kind).map((c) => [c.key, c.n]))
  const known = (entity: string) => [
    'name',
    ...codenames.filter((c) => c.entity === entity).map((c) => c.codename as string),
  ]
  const keys = (['customer', 'contact'] as const).flatMap((entity) =>
    counts
      .filter((c) => c.kind === `${entity}_key`)
      .map((c) => ({
        entity,
        key: c.key as string,
        count: c.n as number,
        did_you_mean: closest(c.key, known(entity)) ?? null,
      })),
  )
  return {
    by_type: of('type'),
    by_status: { received: waiting.received as number, pending: waiting.pending as number },
    by_reason: of('reason'),
    dropped_key_names: keys,
    last_errors: errors,
  }
}
