import * as v from 'valibot'
import { Day, describe, id, int, limitParam as limit, Timestamp } from '../validate.ts'
import { DEFAULT_DELIVERY_LIMIT, MAX_DELIVERY_LIMIT } from '../webhooks/deliveries.ts'
import { EVENTS } from '../webhooks/events.ts'
import { ChangeDriverSchema, ScoreAlertsSchema } from '../scoring/alerts.ts'
import { ScoringModelSchema } from '../scoring/model.ts'
import { selection, Where } from '../records/search.ts'
import { SourceOfTruth } from '../accounts/accounts.ts'
import { Notification } from '../notifications/notifications.ts'
import { Events, TrackAccepted } from '../tracking/schemas.ts'
import { Upload, UploadAccepted, UploadAction, UploadSummary } from '../uploads/schemas.ts'

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

export const Status = <T extends string>(status: T) => v.object({ status: v.literal(status) })

export const DeliveryQuery = { limit: limit(DEFAULT_DELIVERY_LIMIT, MAX_DELIVERY_LIMIT) }
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
