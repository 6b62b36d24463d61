import { randomUUID } from 'node:crypto'
import * as v from 'valibot'
import { TIME_RULE, timeOf } from '../../dates.ts'
import { cutText, isObject, storableText, UNSTORABLE } from '../../validate.ts'
import { freeFormProblems } from '../../values.ts'
import { END_TIME, MIN_TIME } from '../intake/limits.ts'

// One relay message as the row stored for it (relay/intake.ts), with its `reason` (and `detail`)
// when it cannot be applied: a problem in one message is counted, never refused (relay/schemas.ts).

export const TYPES = ['identify', 'group', 'track', 'page', 'screen', 'alias'] as const
export type RelayType = (typeof TYPES)[number]
const MAX_ID = 255

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

// The row's columns, in the order each row is sent and read back by position (relay/intake.ts),
// each with the type it is read as: json_to_recordset, matching each row's keys by name, took 12 µs
// a row; by position, 4 (docs/benchmarks.md).
export const COLUMNS: { [column in keyof Row]: 'text' | 'float8' | 'jsonb' } = {
  message_id: 'text',
  type: 'text',
  user_id: 'text',
  group_id: 'text',
  event: 'text',
  occurred_at: 'float8',
  traits: 'jsonb',
  properties: 'jsonb',
  reason: 'text',
  detail: 'text',
}
const NAMES = Object.keys(COLUMNS) as (keyof Row)[]

// Batch-level fields a message may lack: sentAt, and context (context.groupId).
export interface BatchDefaults {
  sentAt?: unknown
  context?: unknown
}

const text = (x: unknown) =>
  (typeof x === 'string' && x.length > 0) || (typeof x === 'number' && Number.isFinite(x))
    ? String(x)
    : null

// The fields as the relay reads them, whatever their shape. The event's time is Segment's:
// receivedAt - (sentAt - timestamp); none given, the time it was received.
const read = (
  m: unknown,
  pathType: RelayType | undefined,
  batch: BatchDefaults,
  receivedAt: number,
) => {
  const msg = isObject(m) ? m : {}
  const type = pathType ?? (typeof msg.type === 'string' ? msg.type : '')
  const context = isObject(msg.context) ? msg.context : isObject(batch.context) ? batch.context : {}
  const stamp = msg.timestamp ?? msg.originalTimestamp
  const sent = timeOf(msg.sentAt ?? batch.sentAt)
  return {
    message: m,
    type,
    messageId: text(msg.messageId),
    userId: text(msg.userId),
    groupId: text(type === 'group' ? msg.groupId : context.groupId),
    event: type === 'track' ? text(msg.event) : null,
    traits:
      type === 'identify' ? (msg.traits ?? context.traits) : type === 'group' ? msg.traits : null,
    properties: type === 'track' ? (msg.properties ?? null) : null,
    at:
      stamp === undefined
        ? receivedAt
        : Number.isFinite(sent)
          ? receivedAt - (sent - timeOf(stamp))
          : timeOf(stamp),
    anonymousId: text(msg.anonymousId),
  }
}

// A finding is an issue whose message is the reason, then the detail (if any) after a line break.
const finding = (reason: string, detail?: string) =>
  detail === undefined ? reason : `${reason}\n${detail}`
const firstProblem = (m: unknown) => {
  const [p] = freeFormProblems(m)
  return p && `${p.path}: ${p.message}`
}
type Read = ReturnType<typeof read>
const idCheck = (name: 'messageId' | 'userId' | 'groupId' | 'event') =>
  v.check<Read, string>(
    (r) => r[name] === null || (r[name] as string).length <= MAX_ID,
    finding('invalid_field', `${name}: at most ${MAX_ID} characters`),
  )
const objectCheck = (name: 'traits' | 'properties') =>
  v.check<Read, string>(
    (r) => r[name] == null || isObject(r[name]),
    finding('invalid_field', `${name}: must be an object`),
  )

// The first finding is the message's reason: the rules are checked in order, on the fields as
// read. A pipe of checks, not an object schema: valibot's object run, shared by every object
// schema of the service, is called with many shapes in `serve`, where the intake spent 32.6 µs of
// CPU a message with it and 24.2 with this pipe (docs/benchmarks.md, "segment").
const Message = v.pipe(
  v.custom<Read>(() => true),
  v.check((r) => isObject(r.message), finding('not_an_object')),
  v.check(
    (r) => (TYPES as readonly string[]).includes(r.type),
    (issue) => finding('unknown_type', `type: ${cutText(storableText(issue.input.type), 40)}`),
  ),
  v.check(
    (r) => firstProblem(r.message) === undefined,
    (issue) => finding('invalid_value', firstProblem(issue.input.message)),
  ),
  idCheck('messageId'),
  idCheck('userId'),
  idCheck('groupId'),
  idCheck('event'),
  objectCheck('traits'),
  objectCheck('properties'),
  v.check(
    (r) => r.at >= MIN_TIME && r.at < END_TIME,
    finding(
      'invalid_timestamp',
      `timestamp (corrected by sentAt): ${TIME_RULE}, from 2000 to 2099`,
    ),
  ),
  v.check((r) => r.type !== 'group' || r.groupId !== null, finding('missing_group_id')),
  v.check(
    (r) => (r.type !== 'identify' && r.type !== 'track') || r.userId !== null,
    (issue) => finding(issue.input.anonymousId === null ? 'missing_user_id' : 'anonymous_only'),
  ),
  v.check((r) => r.type !== 'track' || r.event !== null, finding('missing_event')),
)

// The message as its row. A message without a (storable) messageId cannot be sent twice: it
// takes one of its own.
export const toRow = (
  m: unknown,
  pathType: RelayType | undefined,
  batch: BatchDefaults,
  receivedAt: number,
): Row => {
  const r = read(m, pathType, batch, receivedAt)
  const checked = v.safeParse(Message, r, { abortEarly: true })
  const [reason, detail] = checked.success ? [null, null] : splitFinding(checked.issues[0].message)
  const id = r.messageId
  return {
    message_id: id !== null && id.length <= MAX_ID && !UNSTORABLE.test(id) ? id : randomUUID(),
    type: reason === 'not_an_object' || reason === 'unknown_type' ? 'unknown' : r.type,
    user_id: reason ? null : r.userId,
    group_id: reason ? null : r.groupId,
    event: reason ? null : r.event,
    occurred_at: reason ? receivedAt : r.at,
    traits: reason ? null : (r.traits ?? null),
    properties: reason ? null : r.properties,
    reason,
    // A key's NUL or unpaired surrogate names the path of its own finding: shown as U+FFFD.
    detail: detail && cutText(storableText(detail), 300),
  }
}

const splitFinding = (message: string): [string, string | null] => {
  const at = message.indexOf('\n')
  return at < 0 ? [message, null] : [message.slice(0, at), message.slice(at + 1)]
}

// The row as it is sent: its values in the order of COLUMNS.
export const asArray = (r: Row) => NAMES.map((name) => r[name])
