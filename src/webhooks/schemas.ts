import * as v from 'valibot'
import { describe, id, int, limitParam, Timestamp } from '../validate.ts'
import { EVENTS } from './events.ts'

// The answers of the webhook routes, as OpenAPI publishes them (api/schemas.ts names them).

const webhookFields = {
  id,
  url: v.string(),
  events: v.array(v.picklist(EVENTS)),
  name: v.nullable(v.string()),
  active: v.boolean(),
  rate_limit: describe(v.nullable(int), 'Deliveries per second at most; null: no limit.'),
  created_at: Timestamp,
  failing_since: describe(
    v.nullable(Timestamp),
    'When the current run of failed attempts began; null after a delivered attempt. A run as long as ' +
      'SERVICE_WEBHOOK_DISABLE_AFTER_SECONDS, or a 410 Gone, disables the endpoint.',
  ),
  last_failure: describe(
    v.nullable(
      v.object({
        at: Timestamp,
        status_code: describe(v.nullable(int), "The receiver's status; null when no answer came."),
        error: describe(
          v.nullable(v.string()),
          'Why no answer came (connection, timeout); null with a status.',
        ),
      }),
    ),
    'The latest failed attempt; null if none failed.',
  ),
  disabled_by: describe(
    v.nullable(v.picklist(['service', 'operator'])),
    'Who disabled the endpoint while active is false: the service (failing, or a 410) or the operator; ' +
      'null while active.',
  ),
}
export const Webhook = v.object(webhookFields)
const Secret = describe(v.string(), 'The signing secret (whsec_ + base64); shown only here.')
export const NewWebhook = v.object({ ...webhookFields, secret: Secret })
export const WebhookSecret = v.object({ secret: Secret })
export const EnabledWebhook = v.object({
  ...Webhook.entries,
  resumed: describe(
    int,
    'Deliveries held while the webhook was disabled, now being sent, oldest first.',
  ),
})

export const TestDelivery = v.object({
  delivery_id: describe(int, 'The delivery, listed in the delivery log like any other.'),
  event: v.picklist(EVENTS),
})
export const EventType = v.object({
  name: v.picklist(EVENTS),
  description: v.string(),
  schema: describe(v.record(v.string(), v.unknown()), 'JSON Schema (2020-12) of the payload.'),
  example: describe(v.record(v.string(), v.unknown()), 'A payload as delivered.'),
})

export const Delivery = v.object({
  id,
  message_id: v.string(),
  status: v.picklist(['pending', 'delivered', 'failed']),
  created_at: Timestamp,
  delivered_at: v.nullable(Timestamp),
  attempts: v.array(
    v.object({
      attempt: int,
      at: Timestamp,
      status_code: describe(v.nullable(int), "The receiver's status; null when no answer came."),
      duration_ms: int,
      error: v.nullable(v.string()),
      response_excerpt: describe(
        v.nullable(v.string()),
        "The start of the receiver's answer (500 characters at most); null when no answer came.",
      ),
    }),
  ),
})
export const Redelivery = v.object({
  id,
  status: v.literal('pending'),
  first_attempt: describe(int, 'The number the first new attempt will have.'),
})
export const Recovery = v.object({
  recovered: describe(
    int,
    'Failed deliveries sent again, oldest first, each with 3 more attempts.',
  ),
})

export const DeliveryQuery = { limit: limitParam(50, 1000) }
