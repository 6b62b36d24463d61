import { Account } from '../accounts/accounts.ts'
import { Key, NewKey } from '../accounts/keys.ts'
import { BackupRequested, Backups } from '../backups/schemas.ts'
import { Property } from '../catalog/properties.ts'
import { Tag, TagTitles } from '../catalog/tags.ts'
import { User } from '../people/users.ts'
import { WeekReport } from '../insights/schemas.ts'
import { Notification } from '../notifications/notifications.ts'
import {
  Contact,
  ContactPage,
  Customer,
  CustomerAggregate,
  CustomerPage,
  CustomerWithExplanation,
} from '../records/schemas.ts'
import { Where } from '../records/search-body.ts'
import { ScoreAlertsSchema } from '../scoring/rules/alerts.ts'
import { ScoringModelSchema } from '../scoring/rules/model.ts'
import { SegmentHistory } from '../segments/schemas.ts'
import { Events, TrackAccepted } from '../tracking/tracker/schemas.ts'
import { Upload, UploadAccepted, UploadAction, UploadSummary } from '../uploads/schemas.ts'
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

// The shapes a generated client names (components/schemas in OpenAPI), each defined in its module.
// test/contract.test.ts runs every operation and checks each answer against its row's schema, so
// the published contract cannot drift from the code.
export const NAMED = {
  Customer,
  CustomerWithExplanation,
  Contact,
  CustomerPage,
  ContactPage,
  SegmentHistory,
  CustomerAggregate,
  WeekReport,
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
  Backups,
  BackupRequested,
}
