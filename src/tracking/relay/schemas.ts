import * as v from 'valibot'
import { describe, int, isObject, Timestamp } from '../../validate.ts'

// The Segment HTTP Tracking API's bodies. Unlike every other body here they are loose: Segment's
// SDKs send fields of their own (context, integrations, _metadata, channel, ...), and a problem
// in one message must not fail its batch (Segment's own answer), so each message is read field
// by field in relay/message.ts and what is wrong is counted per reason instead of refused. Beside
// the 500 KB (intake.ts): a batch of tiny messages would otherwise cost a row each by the hundred
// thousand. Real messages take 200 bytes and more, so the byte limit comes first for them.
const MAX_BATCH_MESSAGES = 2500

const field = (text: string) => v.optional(describe(v.unknown(), text))

const messageFields = {
  type: field(
    'identify, group, track, page, screen or alias (in a batch; a single call takes its path).',
  ),
  messageId: field(
    'Deduplicates: a messageId already received for the account is not applied again.',
  ),
  userId: field('The contact (its external id).'),
  anonymousId: field(
    'Accepted and counted, never applied: without userId, a message names nobody here.',
  ),
  groupId: field('group: the customer (its external id).'),
  event: field('track: the event name.'),
  traits: field(
    'identify and group: the attributes (keys that are attribute codenames) and `name`.',
  ),
  properties: field('track: stored with the event.'),
  timestamp: field('ISO-8601 time of the message, corrected for clock skew by sentAt.'),
  originalTimestamp: field("RudderStack's name for timestamp."),
  sentAt: field('ISO-8601 time the client sent it.'),
  context: field('context.groupId names the customer of an identify or track.'),
}

// An object whose other keys are accepted (valibot's looseObject alone takes an array for one).
const loose = <E extends v.ObjectEntries>(entries: E) =>
  v.pipe(v.custom<Record<string, unknown>>(isObject, 'Must be an object.'), v.looseObject(entries))

export const RelayMessage = describe(
  loose({ ...messageFields, writeKey: v.optional(v.string()) }),
  'One Segment message (any other fields are accepted and ignored).',
)

export const RelayBatch = loose({
  batch: describe(
    v.pipe(
      v.array(v.unknown()),
      v.maxLength(MAX_BATCH_MESSAGES, `At most ${MAX_BATCH_MESSAGES} messages a batch.`),
    ),
    'The messages, each with its own type.',
  ),
  writeKey: v.optional(v.string()),
  sentAt: field('When the batch was sent: the sentAt of messages that have none.'),
  context: field('Context merged under each message (context.groupId).'),
})

export const RelayAccepted = v.object({ success: v.literal(true) })

const counts = v.record(v.string(), int)

export const IngestStatus = v.object({
  by_type: describe(counts, 'Messages applied or dropped, by type.'),
  by_status: describe(
    v.object({ received: int, pending: int }),
    'Messages not yet applied: received (waiting for the apply job) and pending (identifies waiting for a group).',
  ),
  by_reason: describe(counts, 'Messages dropped (or traits dropped, invalid_trait), by reason.'),
  dropped_key_names: v.array(
    v.object({
      entity: v.picklist(['customer', 'contact']),
      key: v.string(),
      count: int,
      did_you_mean: v.nullable(v.string()),
    }),
  ),
  last_errors: v.array(
    v.object({
      message_id: v.string(),
      type: v.string(),
      reason: v.string(),
      detail: v.nullable(v.string()),
      received_at: Timestamp,
    }),
  ),
})
