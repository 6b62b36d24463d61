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
import { ChangeDriverSchema, ScoreAlertsSchema } from '../scoring/alerts.ts'
import { ScoringModelSchema } from '../scoring/model.ts'
import { selection, Where } from '../records/search.ts'
import { Account } from '../accounts/accounts.ts'
import { Key, NewKey } from '../accounts/keys.ts'
import { Property } from '../catalog/properties.ts'
import { Tag, TagTitles } from '../catalog/tags.ts'
import { User } from '../catalog/users.ts'

// The bodies the API answers with, as OpenAPI publishes them. Handlers build their answers from
// SQL; test/contract.test.ts runs every operation and checks each answer against these, so the
// published contract cannot drift from the code.

const Score = v.nullable(int)
const Value = v.union([v.string(), v.number(), v.boolean(), v.null()])

const Trend = describe(
  v.nullable(v.record(v.pipe(v.string(), v.isoDate()), v.number())),
  'Engagement score by date: up to 15 scored snapshots of the last 365 days.',
)
const Properties = describe(
  v.record(v.string(), Value),
  'Every defined attribute and metric the record has a value for, by codename (metrics: the latest value).',
)
const recordFields = {
  id: describe(v.string(), 'The external id the client gave it.'),
  service_id: describe(int, 'The id the service gave it; stable, and what paging.next.after names.'),
  name: describe(v.nullable(v.string()), 'Null for a record that tracking created without a name.'),
}
const recordTail = {
  properties: Properties,
  createdAt: Timestamp,
  updatedAt: Timestamp,
}
const tags = describe(v.array(v.string()), 'Tag titles, in byte order.')
const engagement = {
  engagementscore: describe(Score, 'Engagement (-100 to 100) of the latest snapshot; null until scored.'),
  engagementscore_difference: describe(
    v.nullable(v.number()),
    'Change of the engagement score against the snapshot about 30 days earlier; null without one.',
  ),
  engagementscore_trend: Trend,
  last_seen: describe(v.nullable(Day), 'The date of the latest metrics snapshot.'),
}

export const Customer = v.object({
  ...recordFields,
  fitscore: describe(Score, 'Fit (-100 to 100) of the attributes and latest metrics; null until scored.'),
  engagementscore: engagement.engagementscore,
  churn_risk: describe(Score, 'Churn risk, 0 to 100; null until scored.'),
  upsell_score: describe(Score, 'Upsell potential, 0 to 100; null until scored.'),
  is_churned: v.boolean(),
  last_seen: engagement.last_seen,
  engagementscore_difference: engagement.engagementscore_difference,
  engagementscore_trend: engagement.engagementscore_trend,
  owner: describe(v.nullable(v.string()), "The owner's email."),
  tags,
  ...recordTail,
})

export const Contact = v.object({
  ...recordFields,
  ...engagement,
  tags,
  customer_external_id: v.string(),
  customer_service_id: int,
  ...recordTail,
})

const Contribution = v.object({ codename: v.string(), contribution: v.number() })
const Driver = v.object({ codename: v.string(), score: v.picklist(['engagement', 'fit']), contribution: v.number() })
const ScoreExplanation = describe(
  v.nullable(
    v.object({
      engagement: describe(v.array(Contribution), 'Each engagement rule: its weighted contribution, in points.'),
      fit: describe(v.array(Contribution), 'Each fit rule: its weighted contribution, in points.'),
      risk_drivers: describe(v.array(Driver), 'Up to 3 rules that lower the scores most, most negative first.'),
      health_drivers: describe(v.array(Driver), 'Up to 3 rules that raise the scores most, largest first.'),
      change_drivers: describe(
        v.array(ChangeDriverSchema),
        'Up to 3 rules whose contributions moved most in the latest scoring that changed the scores, largest ' +
          'move first; empty until score alerts are set (PUT /admin/v1/accounts/{id}/score-alerts).',
      ),
    }),
  ),
  'Why the scores are what they are (docs/scoring.md).',
)

export const CustomerWithExplanation = v.object({ ...Customer.entries, score_explanation: ScoreExplanation })

const page = <S extends v.GenericSchema>(item: S) =>
  v.object({
    results: v.array(item),
    paging: describe(
      v.optional(
        v.object({
          next: v.object({
            after: describe(
              v.union([int, v.string()]),
              "The last record's service_id; under a sort, an opaque signed cursor of its sort values.",
            ),
          }),
        }),
      ),
      'Present when there is a next page: send `after` back, as it came, with the same request to get it.',
    ),
    total: describe(v.optional(int), 'With `count`: how many records match, paging aside.'),
    total_is_estimate: describe(v.optional(v.literal(true)), 'With `count: "estimate"`: total is the planner\'s.'),
  })
export const CustomerPage = page(Customer)
export const ContactPage = page(Contact)

export const Segment = v.object({
  id,
  name: v.string(),
  ...selection,
  members: describe(int, 'Customers in the segment as of its latest recomputation (computed_at).'),
  computed_at: describe(v.nullable(Timestamp), 'When its membership was last recomputed; null before the first time.'),
  created_at: Timestamp,
  updated_at: Timestamp,
})

export const SegmentHistory = v.object({
  results: v.array(
    v.object({
      customer: describe(v.string(), "The customer's external id."),
      service_id: int,
      entered_at: describe(Timestamp, 'When the recomputation found it matching.'),
      exited_at: describe(v.nullable(Timestamp), 'When a recomputation found it no longer matching; null: a member.'),
    }),
  ),
  paging: describe(
    v.optional(v.object({ next: v.object({ after: int }) })),
    'Present when there is a next page: send `after` back as ?after= to get it.',
  ),
})

const Bucket = v.object({ from: v.number(), to: v.number(), count: int })
const FieldAggregate = v.object({
  field: v.string(),
  count: describe(int, 'How many matches have a value.'),
  avg: v.nullable(v.number()),
  min: v.nullable(v.number()),
  max: v.nullable(v.number()),
  histogram: describe(
    v.array(Bucket),
    'Equal buckets from min to max, each with its lower bound, the last with max as well; one bucket when all ' +
      'values are equal, none without values.',
  ),
})
const Point = v.object({ id: v.string(), name: v.string(), engagementscore: int, fitscore: int, churn_risk: Score })
export const CustomerAggregate = v.object({
  count: describe(int, 'How many customers match.'),
  fields: describe(v.array(FieldAggregate), 'Each field asked for, in order.'),
  grid: describe(
    v.optional(
      v.object({
        scored: describe(int, 'Matches with both scores, the ones counted in the cells.'),
        counts: describe(
          v.array(v.array(int)),
          'counts[i][j]: engagement in cell i and fit in cell j, cells of 20 points from -100, the last with 100.',
        ),
      }),
    ),
    'With matrix "grid".',
  ),
  points: describe(
    v.optional(
      v.object({
        scored: describe(int, 'Matches with both scores.'),
        sampled: describe(v.boolean(), 'More are scored than items holds.'),
        items: describe(v.array(Point), 'In sample order: by the MD5 of the external id.'),
      }),
    ),
    'With matrix "points".',
  ),
})

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
