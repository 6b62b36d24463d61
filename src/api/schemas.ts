import * as v from 'valibot'
import { Day, describe, id, int, limitParam as limit, nonEmpty, Timestamp } from '../validate.ts'
import { DEFAULT_EVENT_LIMIT, MAX_EVENT_LIMIT } from '../admin/events.ts'
import {
  Delivery,
  EnabledWebhook,
  EventType,
  NewWebhook,
  Recovery,
  Redelivery,
  TestDelivery,
  Webhook,
  WebhookSecret,
} from '../webhooks/schemas.ts'
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
import { Account } from '../accounts/accounts.ts'
import { Key, NewKey } from '../accounts/keys.ts'
import { Property } from '../catalog/properties.ts'
import { Tag, TagTitles } from '../catalog/tags.ts'
import { User } from '../catalog/users.ts'

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

export const UploadAction = v.object({ upload_id: int, status: UploadState })

export const TrackAccepted = v.object({ status: v.literal('received'), events: int })

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
