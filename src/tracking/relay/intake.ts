import type { App } from '../../context.ts'
import type { Tx } from '../../db/client.ts'
import { TASKS } from '../../db/jobs.ts'
import { SQLSTATE, sqlState } from '../../db/sqlstate.ts'
import { refuse } from '../../errors.ts'
import { jobUnlessWaiting, throughGate } from '../intake/gate.ts'
import { MAX_EVENT_BYTES, overBytes } from '../intake/limits.ts'
import { asArray, type BatchDefaults, COLUMNS, type RelayType, toRow } from './message.ts'
import { relayReceived } from './metrics.ts'

// The Segment HTTP Tracking API's intake (docs/api.md, "Segment-compatible ingest"): each message
// is read into a row (relay/message.ts), one statement stores them all with the job that applies
// them (relay/apply.ts; a track that names its customer is a tracked event, tracker/apply.ts), and
// a 200 means all are committed. What is wrong with one message is its `reason`, counted when the
// job drops it; only the size limits and unreadable JSON fail a request.

const MAX_BATCH_BYTES = 500 * 1024

// Each row's COLUMNS, read by position from its array `r`: written once, positions as constants.
const READ = {
  text: (i: number) => `r->>${i}`,
  float8: (i: number) => `(r->>${i})::float8`,
  jsonb: (i: number) => `nullif(r->${i}, 'null')`,
}
const COLUMN_LIST = Object.entries(COLUMNS)
  .map(([name, type], i) => `${READ[type](i)} as ${name}`)
  .join(', ')

// One statement: the rows whose messageId was not yet received, and the apply job unless one waits.
// Only while the account exists: segment_messages has no foreign key to it
// (sql/041_segment_intake.sql). A track that names its customer (context.groupId), of an account
// whose records the API owns, is stored as a tracked event, matched and counted by the tracker's
// apply like the tracker's own (sql/046, tracker/apply.ts), which the relay's apply job runs
// after the messages received before it (relay/apply.ts); every other message is stored for the
// relay's apply job itself. The rows come as one JSON text, each row an array of the COLUMNS
// (relay/message.ts), read by position, their messageIds already distinct. Each table's unique
// index deduplicates its own rows: a plain insert, run again with ON CONFLICT once it meets a
// duplicate (no probe whose plan goes wrong as the tables outgrow their statistics); a messageId
// received once into each table is dropped by the apply jobs (relay/tracks.ts, relay/apply.ts).
const store = (tx: Tx, accountId: number, rows: string, dedup: boolean) => tx`
  with a as (
    select source_of_truth = 'API' as api from accounts where id = ${accountId}
  ), sent as (
    select i, ${tx.unsafe(COLUMN_LIST)} from jsonb_array_elements(${rows}::text::jsonb) with ordinality as t(r, i)
  ), x as (
    -- A track that names its customer (a track with a reason names nothing), where the API owns the records.
    select sent.*, a.api and type = 'track' and group_id is not null and reason is null as tracked from a, sent
  ), d as (
    insert into tracking_events (account_id, name, occurred_at, customer_external_id, contact_external_id, data,
      message_id)
    select ${accountId}, x.event, to_timestamp(x.occurred_at / 1000), x.group_id, x.user_id,
      case when x.properties is not null then jsonb_build_object('properties', x.properties) end, x.message_id
    from x where x.tracked order by x.i
    ${dedup ? tx`on conflict (account_id, message_id) where message_id is not null do nothing` : tx``}
    returning 1
  ), e as (
    insert into segment_messages (account_id, message_id, type, user_id, group_id, event, occurred_at, traits,
      properties, reason, detail)
    select ${accountId}, x.message_id, x.type, x.user_id, x.group_id, x.event, to_timestamp(x.occurred_at / 1000),
      x.traits, x.properties, x.reason, x.detail
    from x where not x.tracked order by x.i
    ${dedup ? tx`on conflict (account_id, message_id) do nothing` : tx``}
    returning 1
  ), stored as (
    select 1 from d union all select 1 from e
  ), ${jobUnlessWaiting(tx, TASKS.applyRelay, accountId, 'stored')}
  select (select count(*) from stored)::int as stored, (select count(*) from j)::int as jobs`

// The messages of one request (a batch, or one call whose path names its type), refused whole only
// past the size limits, as Segment refuses: 500 KB a request, 32 KB a message.
export const receiveRelay = async (
  app: App,
  accountId: number,
  bodyBytes: number,
  messages: unknown[],
  pathType?: RelayType,
  batch: BatchDefaults = {},
) => {
  if (bodyBytes > MAX_BATCH_BYTES) refuse(400, `A batch may take at most ${MAX_BATCH_BYTES} bytes.`)
  // A message is part of the body as sent: in a body within the limit, none is past it.
  const big =
    bodyBytes <= MAX_EVENT_BYTES
      ? -1
      : messages.findIndex((m) => overBytes(JSON.stringify(m) ?? 'null'))
  if (big >= 0) {
    const path = pathType ? '' : `/batch/${big}`
    refuse(400, 'A message is too large.', [
      { path, message: `At most ${MAX_EVENT_BYTES} bytes of JSON.` },
    ])
  }
  const receivedAt = Date.now()
  const rows = messages.map((m) => toRow(m, pathType, batch, receivedAt))
  // A messageId twice in one request: the first is stored.
  const seen = new Set<string>()
  const json = JSON.stringify(
    rows.filter((r) => !seen.has(r.message_id) && seen.add(r.message_id)).map(asArray),
  )
  const attempt = (dedup: boolean) =>
    throughGate(app, TASKS.applyRelay, accountId, (tx) => store(tx, accountId, json, dedup))
  const [{ stored }] = await attempt(false).catch((err) =>
    sqlState(err) === SQLSTATE.UNIQUE_VIOLATION ? attempt(true) : Promise.reject(err),
  )
  const byType = new Map<string, number>([['duplicate', rows.length - stored]])
  for (const { type } of rows) byType.set(type, (byType.get(type) ?? 0) + 1)
  for (const [type, n] of byType) if (n) relayReceived.inc({ type }, n)
  return { success: true as const }
}
