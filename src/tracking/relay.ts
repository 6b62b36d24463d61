import { randomUUID } from 'node:crypto'
import type { App } from '../context.ts'
import type { Tx } from '../db/client.ts'
import { TASKS } from '../db/jobs.ts'
import { TIME_RULE, timeOf } from '../dates.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'
import { refuse } from '../errors.ts'
import { cutText, isObject, storableText, UNSTORABLE } from '../validate.ts'
import { freeFormProblems } from '../values.ts'
import { jobUnlessWaiting, throughGate } from './intake.ts'
import { relayReceived } from './relay-metrics.ts'

// The Segment HTTP Tracking API's intake (docs/api.md, "Segment-compatible ingest"): each message is
// read here into a row, one statement stores them all with the job that applies them (relay-apply.ts;
// a track that names its customer is a tracked event, apply.ts), and a 200 means all are committed.
// What is wrong with one message is its `reason`, counted when the job drops it; only the size limits
// and unreadable JSON fail a request.

const MAX_MESSAGE_BYTES = 32 * 1024
const MAX_BATCH_BYTES = 500 * 1024
export const TYPES = ['identify', 'group', 'track', 'page', 'screen', 'alias'] as const
type RelayType = (typeof TYPES)[number]
const MAX_ID = 255
// The tracker's bounds on an event's time (tracking/schemas.ts): 2000-01-01 up to 2100-01-01.
const MIN_TIME = Date.UTC(2000, 0, 1)
const MAX_TIME = Date.UTC(2100, 0, 1)

interface Row {
  message_id: string
  type: string
  user_id: string | null
  group_id: string | null
  event: string | null
  // Epoch milliseconds: a Date's ISO text cost more to write and to read than the event itself.
  occurred_at: number
  traits: unknown
  properties: unknown
  reason: string | null
  detail: string | null
}

// Batch-level fields a message may lack: sentAt, and context (context.groupId).
interface BatchDefaults {
  sentAt?: unknown
  context?: unknown
}

const text = (x: unknown) =>
  (typeof x === 'string' && x.length > 0) || (typeof x === 'number' && Number.isFinite(x)) ? String(x) : null
const firstProblem = (m: unknown) => {
  const [p] = freeFormProblems(m)
  return p && `${p.path}: ${p.message}`
}

// The message as its row, with the first reason found why it cannot be applied. The event's time
// is Segment's: receivedAt - (sentAt - timestamp); none given, the time it was received.
const toRow = (m: unknown, pathType: RelayType | undefined, batch: BatchDefaults, receivedAt: number): Row => {
  const msg = isObject(m) ? m : {}
  const id = text(msg.messageId)
  const type = pathType ?? (typeof msg.type === 'string' ? msg.type : '')
  const context = isObject(msg.context) ? msg.context : isObject(batch.context) ? batch.context : {}
  const userId = text(msg.userId)
  const groupId = text(type === 'group' ? msg.groupId : context.groupId)
  const event = type === 'track' ? text(msg.event) : null
  const traits = type === 'identify' ? (msg.traits ?? context.traits) : type === 'group' ? msg.traits : null
  const stamp = msg.timestamp ?? msg.originalTimestamp
  const sent = timeOf(msg.sentAt ?? batch.sentAt)
  const at =
    stamp === undefined ? receivedAt : Number.isFinite(sent) ? receivedAt - (sent - timeOf(stamp)) : timeOf(stamp)
  const why = (): [string, string | null] | null => {
    if (!isObject(m)) return ['not_an_object', null]
    if (!(TYPES as readonly string[]).includes(type))
      return ['unknown_type', `type: ${cutText(storableText(String(type)), 40)}`]
    const invalid = firstProblem(m)
    if (invalid) return ['invalid_value', invalid]
    for (const [name, value] of [
      ['messageId', id],
      ['userId', userId],
      ['groupId', groupId],
      ['event', event],
    ] as const)
      if (value !== null && value.length > MAX_ID) return ['invalid_field', `${name}: at most ${MAX_ID} characters`]
    if (traits != null && !isObject(traits)) return ['invalid_field', 'traits: must be an object']
    if (type === 'track' && msg.properties != null && !isObject(msg.properties))
      return ['invalid_field', 'properties: must be an object']
    if (!(at >= MIN_TIME && at < MAX_TIME))
      return ['invalid_timestamp', `timestamp (corrected by sentAt): ${TIME_RULE}, from 2000 to 2099`]
    if (type === 'group' && groupId === null) return ['missing_group_id', null]
    if ((type === 'identify' || type === 'track') && userId === null)
      return text(msg.anonymousId) === null ? ['missing_user_id', null] : ['anonymous_only', null]
    if (type === 'track' && event === null) return ['missing_event', null]
    return null
  }
  const [reason, detail] = why() ?? [null, null]
  return {
    // A message without a (storable) messageId cannot be sent twice: it takes one of its own.
    message_id: id !== null && id.length <= MAX_ID && !UNSTORABLE.test(id) ? id : randomUUID(),
    type: reason === 'not_an_object' || reason === 'unknown_type' ? 'unknown' : type,
    user_id: reason ? null : userId,
    group_id: reason ? null : groupId,
    event: reason ? null : event,
    occurred_at: reason ? receivedAt : at,
    traits: reason ? null : (traits ?? null),
    properties: reason || type !== 'track' ? null : (msg.properties ?? null),
    reason,
    // A key's NUL or unpaired surrogate names the path of its own finding: shown as U+FFFD.
    detail: detail && cutText(storableText(detail), 300),
  }
}

// One statement: the rows whose messageId was not yet received, and the apply job unless one waits.
// Only while the account exists: segment_messages has no foreign key to it (sql/041_segment_intake.sql).
// A track that names its customer (context.groupId), of an account whose records the API owns, is
// stored as a tracked event, matched and counted by the tracker's apply like the tracker's own (sql/046,
// apply.ts), which the Segment apply job runs after the messages received before it (relay-apply.ts);
// every other message is stored for the Segment apply job itself. The rows come as one JSON text, each
// row an array in the order of `asArray`, read by position (json_to_recordset, matching each row's keys
// by name, took 12 µs a row; by position, 4: docs/benchmarks.md), their messageIds already distinct.
// Each table's unique index deduplicates its own rows: a plain insert, run again with ON CONFLICT once it
// meets a duplicate (no probe whose plan goes wrong as the tables outgrow their statistics); a messageId
// received once into each table is dropped by the apply jobs (relay-tracks.ts, relay-apply.ts).
const store = (tx: Tx, accountId: number, rows: string, dedup: boolean) => tx`
  with a as (
    select source_of_truth = 'API' as api from accounts where id = ${accountId}
  ), x as (
    select i, r->>0 as message_id, r->>1 as type, r->>2 as user_id, r->>3 as group_id, r->>4 as event,
      (r->>5)::float8 as occurred_at, nullif(r->6, 'null') as traits, nullif(r->7, 'null') as properties,
      r->>8 as reason, r->>9 as detail,
      -- A track that names its customer (a track with a reason names nothing), where the API owns the records.
      a.api and r->>1 = 'track' and r->>3 is not null and r->>8 is null as tracked
    from a, jsonb_array_elements(${rows}::text::jsonb) with ordinality as t(r, i)
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

const asArray = (r: Row) => [
  r.message_id,
  r.type,
  r.user_id,
  r.group_id,
  r.event,
  r.occurred_at,
  r.traits,
  r.properties,
  r.reason,
  r.detail,
]

const bytes = (s: string) => (s.length * 3 > MAX_MESSAGE_BYTES ? Buffer.byteLength(s) : s.length)

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
    bodyBytes <= MAX_MESSAGE_BYTES
      ? -1
      : messages.findIndex((m) => bytes(JSON.stringify(m) ?? 'null') > MAX_MESSAGE_BYTES)
  if (big >= 0) {
    const path = pathType ? '' : `/batch/${big}`
    refuse(400, 'A message is too large.', [{ path, message: `At most ${MAX_MESSAGE_BYTES} bytes of JSON.` }])
  }
  const receivedAt = Date.now()
  const rows = messages.map((m) => toRow(m, pathType, batch, receivedAt))
  // A messageId twice in one request: the first is stored.
  const seen = new Set<string>()
  const json = JSON.stringify(rows.filter((r) => !seen.has(r.message_id) && seen.add(r.message_id)).map(asArray))
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
