import * as v from 'valibot'
import { describe, id, id255, strict, Timestamp } from '../validate.ts'

// An erasure request, its answers, and the export documents (docs/api.md, "Privacy").
const MAX_ERASURE_PEOPLE = 1000

// Both lists may be left out or empty: such a request erases nobody, and is logged all the same.
export const ErasureBody = strict({
  contacts: v.optional(
    v.pipe(
      v.array(strict({ customer_external_id: id255, contact_external_id: id255 })),
      v.maxLength(MAX_ERASURE_PEOPLE, `At most ${MAX_ERASURE_PEOPLE} contacts per request.`),
    ),
    [],
  ),
  customers: v.optional(
    v.pipe(
      v.array(id255),
      v.maxLength(MAX_ERASURE_PEOPLE, `At most ${MAX_ERASURE_PEOPLE} customers per request.`),
    ),
    [],
  ),
})

const Status = v.picklist(['pending', 'done', 'failed'])
export const ErasureAccepted = v.object({ id, status: Status })
export const Erasure = v.object({
  id,
  status: Status,
  key_id: describe(v.nullable(v.number()), 'The key that asked; null when the admin API did.'),
  requested_at: Timestamp,
  finished_at: v.nullable(Timestamp),
  requested: describe(
    v.object({ contacts: v.number(), customers: v.number() }),
    'How many people were named.',
  ),
  counts: describe(
    v.record(v.string(), v.number()),
    'Rows removed or redacted, per kind (tracking_events, contacts, webhook_deliveries, ...).',
  ),
})

// What an export holds (export.ts), as the document's schema publishes it.
const Held = v.object({
  record: v.record(v.string(), v.unknown()),
  scores: v.nullable(v.record(v.string(), v.unknown())),
  snapshots: v.array(v.object({ date: v.string(), values: v.record(v.string(), v.unknown()) })),
  tags: v.array(v.string()),
})
const Rows = v.array(v.record(v.string(), v.unknown()))
const segmentMessages = describe(
  Rows,
  'The Segment messages held that name it (userId; a customer: groupId, or a contact of its userId), as stored.',
)
export const ContactExport = v.object({
  contact: Held,
  events: Rows,
  segment_messages: segmentMessages,
})
export const CustomerExport = v.object({
  customer: Held,
  events: Rows,
  segment_messages: segmentMessages,
  contacts: v.array(Held),
})
