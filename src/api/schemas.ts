import * as v from 'valibot'
import { Day, describe, id, int, limitParam as limit, nonEmpty, Timestamp } from '../validate.ts'
import { DEFAULT_EVENT_LIMIT, MAX_EVENT_LIMIT } from '../admin/events.ts'
import { DEFAULT_DELIVERY_LIMIT, MAX_DELIVERY_LIMIT } from '../webhooks/deliveries.ts'
import { EVENTS } from '../webhooks/events.ts'
import { ScoreAlertsSchema } from '../scoring/alerts.ts'
import { ScoringModelSchema } from '../scoring/model.ts'
import { Where } from '../records/search-body.ts'
import {
  Contact,
  ContactPage,
  Customer,
  CustomerAggregate,
  CustomerPage,
  CustomerWithExplanation,
} from '../records/schemas.ts'
import { SegmentHistory } from '../segments/schemas.ts'
import { SourceOfTruth } from '../accounts/accounts.ts'

// The bodies the API answers with, as OpenAPI publishes them. Handlers build their answers from
// SQL; test/contract.test.ts runs every operation and checks each answer against these, so the
// published contract cannot drift from the code.

export const UploadAccepted = v.object({
  upload_id: int,
  status: v.literal('received'),
  items: describe(int, 'How many items the upload holds.'),
})

const UploadState = v.picklist(['received', 'processing', 'processed', 'failed'])
export const Upload = v.object({
  upload_id: int,
  kind: v.picklist(['customers', 'contacts']),
  status: UploadState,
  items: int,
  created: v.nullable(int),
  updated: v.nullable(int),
  ignored: v.nullable(int),
  dropped_keys: describe(v.nullable(int), 'Attribute and metric keys dropped because no property defines them.'),
  warnings: v.nullable(v.array(v.object({ external_id: v.string(), message: v.string() }))),
  error: describe(v.nullable(v.string()), 'Why processing failed: where (item and field, when known), then what.'),
  received_at: Timestamp,
  processed_at: v.nullable(Timestamp),
  scored_at: v.nullable(Timestamp),
})

export const UploadSummary = v.object({
  ...Upload.entries,
  stuck: describe(v.boolean(), 'Not processed within SERVICE_STUCK_UPLOAD_SECONDS of its arrival.'),
})

const Scores = v.object({
  engagementscore: v.nullable(int),
  engagementscore_difference: v.nullable(int),
  fitscore: v.nullable(int),
  churn_risk: v.nullable(int),
  upsell_score: v.nullable(int),
  last_seen: describe(v.nullable(v.string()), 'The date of the latest scored snapshot (YYYY-MM-DD).'),
})
export const ScoringPreview = v.object({
  external_id: v.string(),
  current: describe(Scores, 'The scores stored now, under the model in force.'),
  preview: describe(Scores, 'The scores the given model would give, from the same stored data.'),
})

export const UploadAction = v.object({ upload_id: int, status: UploadState })

export const TrackAccepted = v.object({ status: v.literal('received'), events: int })

export const Account = v.object({
  id,
  name: v.string(),
  source_of_truth: SourceOfTruth,
  tracker_key: describe(v.string(), 'The public key tracking requests carry in `trackerKey`.'),
  tracking_domains: v.array(v.string()),
  created_at: Timestamp,
})

const Scope = v.picklist(['search', 'upload', 'track'])
export const Key = v.object({
  id,
  name: v.nullable(v.string()),
  scopes: v.array(Scope),
  created_at: Timestamp,
  revoked_at: v.nullable(Timestamp),
})
export const NewKey = v.object({
  ...v.omit(Key, ['revoked_at']).entries,
  token: describe(v.string(), 'The key to send in the service-key header; shown only here.'),
})

export const User = v.object({ id, email: v.string(), name: v.nullable(v.string()) })

export const Property = v.object({
  entity: v.picklist(['customer', 'contact']),
  kind: v.picklist(['attribute', 'metric']),
  codename: v.string(),
  type: v.picklist(['string', 'number', 'boolean', 'date']),
  name: v.nullable(v.string()),
  system: describe(v.boolean(), 'Defined by the service for every account.'),
})

export const Tag = v.object({ id, title: v.string(), color: v.nullable(v.string()) })
export const TagTitles = v.object({ titles: v.array(v.string()) })

const webhookFields = {
  id,
  url: v.string(),
  events: v.array(v.picklist(EVENTS)),
  name: v.nullable(v.string()),
  active: v.boolean(),
  rate_limit: describe(v.nullable(int), 'Deliveries per second at most; null: no limit.'),
  created_at: Timestamp,
}
export const Webhook = v.object(webhookFields)
const Secret = describe(v.string(), 'The signing secret (whsec_ + base64); shown only here.')
export const NewWebhook = v.object({ ...webhookFields, secret: Secret })
export const WebhookSecret = v.object({ secret: Secret })
export const EnabledWebhook = v.object({
  ...Webhook.entries,
  resumed: describe(int, 'Deliveries held while the webhook was disabled, now being sent, oldest first.'),
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
  recovered: describe(int, 'Failed deliveries sent again, oldest first, each with 3 more attempts.'),
})

export const Notification = v.object({
  id,
  user_email: v.string(),
  kind: v.string(),
  body: v.record(v.string(), v.unknown()),
  created_at: Timestamp,
})

export const Events = v.object({
  customer: describe(v.nullable(v.string()), 'The customer asked for, or null for the whole account.'),
  count: int,
  by_status: v.object({ received: int, applied: int, unmatched: int }),
  events: v.array(
    v.object({
      id,
      name: v.string(),
      timestamp: describe(int, 'When it happened, Unix milliseconds, as sent.'),
      identification: v.object({ customer: v.optional(v.string()), contact: v.optional(v.string()) }),
      data: v.nullable(v.record(v.string(), v.unknown())),
      status: v.picklist(['received', 'applied', 'unmatched']),
      customer_service_id: v.nullable(int),
      contact_service_id: v.nullable(int),
      received_at: Timestamp,
    }),
  ),
})

export const Status = <T extends string>(status: T) => v.object({ status: v.literal(status) })

export const DeliveryQuery = { limit: limit(DEFAULT_DELIVERY_LIMIT, MAX_DELIVERY_LIMIT) }
export const EventQuery = {
  customer: { description: "Only this customer's events (its external id).", schema: nonEmpty },
  limit: limit(DEFAULT_EVENT_LIMIT, MAX_EVENT_LIMIT),
}
export const UploadQuery = {
  status: { description: 'Only uploads in this state.', schema: UploadState },
  stuck: {
    description: 'true: only stuck uploads; false (the default): every upload.',
    schema: v.optional(
      v.pipe(
        v.picklist(['true', 'false']),
        v.transform((s) => s === 'true'),
      ),
      'false',
    ),
  },
}
export const NotificationQuery = {
  user_email: { description: "Only this user's notifications (its email, in any case).", schema: nonEmpty },
}

// The shapes a generated client names (components/schemas in OpenAPI).
export const NAMED = {
  Customer,
  CustomerWithExplanation,
  Contact,
  CustomerPage,
  ContactPage,
  SegmentHistory,
  CustomerAggregate,
  UploadAccepted,
  Upload,
  UploadSummary,
  UploadAction,
  TrackAccepted,
  Account,
  Key,
  NewKey,
  User,
  Property,
  Tag,
  TagTitles,
  Webhook,
  NewWebhook,
  WebhookSecret,
  EnabledWebhook,
  TestDelivery,
  EventType,
  ScoreAlerts: ScoreAlertsSchema,
  Delivery,
  Redelivery,
  Recovery,
  Notification,
  Events,
  ScoringModel: ScoringModelSchema,
  Where,
}
