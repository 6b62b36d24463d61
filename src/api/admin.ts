import * as v from 'valibot'
import { Refusal, refuse } from '../errors.ts'
import { refusalReply } from '../http/problem.ts'
import { idParam, textParam } from '../route.ts'
import { invoke } from '../http/router.ts'
import {
  createAccount,
  CreateAccountBody,
  accountIn,
  getAccount,
  listAccounts,
  setTrackingDomains,
  TrackingBody,
  updateAccount,
  UpdateAccountBody,
} from '../accounts/accounts.ts'
import { CreateKeyBody, createKey, listKeys, revokeKey } from '../accounts/keys.ts'
import {
  addUser,
  createTag,
  defineProperty,
  deleteProperty,
  listProperties,
  listTags,
  listUsers,
  PropertyBody,
  TagBody,
  UserBody,
} from '../admin/properties.ts'
import {
  getScoreAlerts,
  getScoringModel,
  PreviewBody,
  previewScores,
  putScoreAlerts,
  putScoringModel,
} from '../admin/scoring.ts'
import {
  addWebhook,
  disableWebhook,
  enableWebhook,
  listWebhooks,
  removeWebhook,
  rotateSecret,
  TestSendBody,
  testSend,
  updateWebhook,
  WebhookBody,
  WebhookPatch,
} from '../admin/webhooks.ts'
import { ScoreAlertsSchema } from '../scoring/alerts.ts'
import { type EventName, eventTypes, PAYLOADS } from '../webhooks/events.ts'
import { jsonSchema } from '../http/openapi.ts'
import { listDeliveries, RecoverBody, recover, redeliver } from '../webhooks/deliveries.ts'
import { ScoringModelSchema } from '../scoring/model.ts'
import { setRecordTags, TagTitlesBody } from '../admin/tagging.ts'
import { segmentsNaming } from '../segments/segments.ts'
import type { Entity } from '../catalog.ts'
import type { App } from '../context.ts'
import type { Tx } from '../db/client.ts'
import type { Handler, QueryOf, Reply, Req, Route } from '../route.ts'
import {
  Account,
  Delivery,
  DeliveryQuery,
  EnabledWebhook,
  EventType,
  Key,
  NewKey,
  NewWebhook,
  Property,
  Recovery,
  Redelivery,
  ScoringPreview,
  Tag,
  TagTitles,
  TestDelivery,
  User,
  Webhook,
  WebhookSecret,
} from './schemas.ts'

const ok = (body: unknown, status = 200): Reply => ({ status, body })
const created = (body: unknown) => ok(body, 201)
const noContent: Reply = { status: 204 }

type Op = Omit<Route, 'auth' | 'tag'>
const A = '/admin/v1/accounts'
const inAccount =
  (fn: (id: number, req: Req, app: App) => Promise<Reply>): Handler =>
  async (req, app) =>
    fn(await accountIn(req, app), req, app)

// The catalog never changes at run time: its JSON Schemas are converted once, on first request.
let published: unknown
const ops: Op[] = [
  {
    name: 'list-event-types',
    reply: { status: 200, body: v.array(EventType) },
    method: 'GET',
    path: '/admin/v1/event-types',
    summary: 'The events a webhook can subscribe to, with their payload schemas and examples',
    handler: async () => ok((published ??= eventTypes().map((e) => ({ ...e, schema: jsonSchema(PAYLOADS[e.name]) })))),
  },
  {
    name: 'create-account',
    reply: { status: 201, body: Account },
    method: 'POST',
    path: A,
    summary: 'Create an account',
    body: CreateAccountBody,
    handler: async (req, app) => created(await createAccount(app.sql, req.input as never)),
  },
  {
    name: 'list-accounts',
    reply: { status: 200, body: v.array(Account) },
    method: 'GET',
    path: A,
    summary: 'List the accounts, oldest first',
    handler: async (_req, app) => ok(await listAccounts(app.sql)),
  },
  {
    name: 'get-account',
    reply: { status: 200, body: Account },
    method: 'GET',
    path: `${A}/:id`,
    summary: 'Read an account',
    handler: async (req, app) => ok(await getAccount(app.sql, idParam(req, 'id'))),
  },
  {
    name: 'update-account',
    reply: { status: 200, body: Account },
    method: 'PATCH',
    path: `${A}/:id`,
    summary: 'Rename an account or change its source of truth',
    body: UpdateAccountBody,
    handler: async (req, app) => ok(await updateAccount(app.sql, idParam(req, 'id'), req.input as never)),
  },
  {
    name: 'create-key',
    reply: { status: 201, body: NewKey },
    method: 'POST',
    path: `${A}/:id/keys`,
    summary: 'Create an API key (the token is shown only here)',
    body: CreateKeyBody,
    handler: inAccount(async (id, req, app) => created(await createKey(app.sql, id, req.input as never))),
  },
  {
    name: 'list-keys',
    reply: { status: 200, body: v.array(Key) },
    method: 'GET',
    path: `${A}/:id/keys`,
    summary: 'List API keys',
    handler: inAccount(async (id, _req, app) => ok(await listKeys(app.sql, id))),
  },
  {
    name: 'revoke-key',
    reply: { status: 204 },
    method: 'DELETE',
    path: `${A}/:id/keys/:key_id`,
    summary: 'Revoke an API key',
    handler: inAccount(
      async (id, req, app) => (await revokeKey(app.sql, id, idParam(req, 'key_id')), app.keys.forget(), noContent),
    ),
  },
  {
    name: 'add-user',
    reply: { status: 201, body: User },
    method: 'POST',
    path: `${A}/:id/users`,
    summary: 'Add a user',
    body: UserBody,
    refusals: [409],
    handler: inAccount(async (id, req, app) => created(await addUser(app.sql, id, req.input as never))),
  },
  {
    name: 'list-users',
    reply: { status: 200, body: v.array(User) },
    method: 'GET',
    path: `${A}/:id/users`,
    summary: 'List users',
    handler: inAccount(async (id, _req, app) => ok(await listUsers(app.sql, id))),
  },
  {
    name: 'define-property',
    reply: { status: 201, body: Property },
    method: 'POST',
    path: `${A}/:id/properties`,
    summary: 'Define a property',
    body: PropertyBody,
    refusals: [409],
    handler: inAccount(async (id, req, app) => created(await defineProperty(app.sql, id, req.input as never))),
  },
  {
    name: 'list-properties',
    reply: { status: 200, body: v.array(Property) },
    method: 'GET',
    path: `${A}/:id/properties`,
    summary: 'List property definitions',
    handler: inAccount(async (id, _req, app) => ok(await listProperties(app.sql, id))),
  },
  {
    name: 'delete-property',
    reply: { status: 204 },
    method: 'DELETE',
    path: `${A}/:id/properties/:entity/:codename`,
    summary: 'Delete a property and its values (refused while the scoring model or a segment uses it)',
    refusals: [409],
    handler: inAccount(async (id, req, app) => {
      const entity = req.params.entity
      if (entity !== 'customer' && entity !== 'contact') refuse(404, 'No such entity: customer or contact.')
      const codename = textParam(req, 'codename')
      // Segments search customers only.
      const usedBy = (tx: Tx) => (entity === 'customer' ? segmentsNaming(tx, id, codename) : Promise.resolve([]))
      await deleteProperty(app.sql, id, entity as Entity, codename, usedBy)
      return noContent
    }),
  },
  {
    name: 'create-tag',
    reply: { status: 201, body: Tag },
    method: 'POST',
    path: `${A}/:id/tags`,
    summary: 'Create a tag',
    body: TagBody,
    refusals: [409],
    handler: inAccount(async (id, req, app) => created(await createTag(app.sql, id, req.input as never))),
  },
  {
    name: 'list-tags',
    reply: { status: 200, body: v.array(Tag) },
    method: 'GET',
    path: `${A}/:id/tags`,
    summary: 'List tags',
    handler: inAccount(async (id, _req, app) => ok(await listTags(app.sql, id))),
  },
  {
    name: 'set-customer-tags',
    reply: { status: 200, body: TagTitles },
    method: 'PUT',
    path: `${A}/:id/customers/:external_id/tags`,
    summary: "Replace a customer's tags (by title)",
    body: TagTitlesBody,
    handler: inAccount(async (id, req, app) =>
      ok(
        await setRecordTags(
          app.sql,
          id,
          'customer',
          textParam(req, 'external_id'),
          (req.input as { titles: string[] }).titles,
        ),
      ),
    ),
  },
  {
    name: 'set-contact-tags',
    reply: { status: 200, body: TagTitles },
    method: 'PUT',
    path: `${A}/:id/contacts/:external_id/tags`,
    summary: "Replace a contact's tags (by title)",
    body: TagTitlesBody,
    handler: inAccount(async (id, req, app) =>
      ok(
        await setRecordTags(
          app.sql,
          id,
          'contact',
          textParam(req, 'external_id'),
          (req.input as { titles: string[] }).titles,
        ),
      ),
    ),
  },
  {
    name: 'set-scoring',
    reply: { status: 200, body: ScoringModelSchema },
    method: 'PUT',
    path: `${A}/:id/scoring`,
    summary: 'Set the scoring model',
    body: ScoringModelSchema,
    handler: inAccount(async (id, req, app) => ok(await putScoringModel(app.sql, id, req.input as never))),
  },
  {
    name: 'get-scoring',
    reply: { status: 200, body: ScoringModelSchema },
    method: 'GET',
    path: `${A}/:id/scoring`,
    summary: 'Read the scoring model',
    handler: inAccount(async (id, _req, app) => ok(await getScoringModel(app.sql, id))),
  },
  {
    name: 'set-score-alerts',
    reply: { status: 200, body: ScoreAlertsSchema },
    method: 'PUT',
    path: `${A}/:id/score-alerts`,
    summary: 'Set which score changes send customer.score_changed ({} turns them off)',
    body: ScoreAlertsSchema,
    example: { churn_risk: { thresholds: [70] }, engagementscore: { delta: 20 } },
    handler: inAccount(async (id, req, app) => ok(await putScoreAlerts(app.sql, id, req.input as never))),
  },
  {
    name: 'get-score-alerts',
    reply: { status: 200, body: ScoreAlertsSchema },
    method: 'GET',
    path: `${A}/:id/score-alerts`,
    summary: 'Read the score alerts',
    handler: inAccount(async (id, _req, app) => ok(await getScoreAlerts(app.sql, id))),
  },
  {
    name: 'preview-scoring',
    reply: { status: 200, body: ScoringPreview },
    method: 'POST',
    path: `${A}/:id/scoring/preview`,
    summary: "A customer's scores under a model not saved yet, beside its current ones (nothing is written)",
    body: PreviewBody,
    example: {
      external_id: 'acme-1',
      model: { customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] } },
    },
    handler: inAccount(async (id, req, app) => {
      const { model, external_id } = req.input as v.InferOutput<typeof PreviewBody>
      return ok(await previewScores(app.sql, id, model, external_id))
    }),
  },
  {
    name: 'set-tracking',
    reply: { status: 200, body: Account },
    method: 'PUT',
    path: `${A}/:id/tracking`,
    summary: 'Set the tracking domains',
    body: TrackingBody,
    handler: inAccount(async (id, req, app) =>
      ok(await setTrackingDomains(app.sql, id, (req.input as { domains: string[] }).domains)),
    ),
  },
  {
    name: 'add-webhook',
    reply: { status: 201, body: NewWebhook },
    method: 'POST',
    path: `${A}/:id/webhooks`,
    summary: 'Subscribe a webhook (the secret is shown only here)',
    body: WebhookBody,
    handler: inAccount(async (id, req, app) =>
      created(await addWebhook(app.sql, id, req.input as never, app.config.webhookAllowPrivate)),
    ),
  },
  {
    name: 'update-webhook',
    reply: { status: 200, body: Webhook },
    method: 'PATCH',
    path: `${A}/:id/webhooks/:webhook_id`,
    summary: "Change a webhook's events, name or rate limit",
    body: WebhookPatch,
    example: { events: ['customer.created', 'customer.score_changed'], rate_limit: 10 },
    handler: inAccount(async (id, req, app) =>
      ok(await updateWebhook(app.sql, id, idParam(req, 'webhook_id'), req.input as never)),
    ),
  },
  {
    name: 'test-webhook',
    reply: { status: 202, body: TestDelivery },
    method: 'POST',
    path: `${A}/:id/webhooks/:webhook_id/test`,
    summary: "Send an event's catalog example to a webhook, signed like every delivery",
    body: TestSendBody,
    example: { event: 'customer.score_changed' },
    refusals: [409],
    handler: inAccount(async (id, req, app) =>
      ok(await testSend(app.sql, id, idParam(req, 'webhook_id'), (req.input as { event: EventName }).event), 202),
    ),
  },
  {
    name: 'list-webhooks',
    reply: { status: 200, body: v.array(Webhook) },
    method: 'GET',
    path: `${A}/:id/webhooks`,
    summary: 'List webhooks',
    handler: inAccount(async (id, _req, app) => ok(await listWebhooks(app.sql, id))),
  },
  {
    name: 'remove-webhook',
    reply: { status: 204 },
    method: 'DELETE',
    path: `${A}/:id/webhooks/:webhook_id`,
    summary: 'Remove a webhook',
    handler: inAccount(
      async (id, req, app) => (await removeWebhook(app.sql, id, idParam(req, 'webhook_id')), noContent),
    ),
  },
  {
    name: 'rotate-secret',
    reply: { status: 200, body: WebhookSecret },
    method: 'POST',
    path: `${A}/:id/webhooks/:webhook_id/rotate-secret`,
    summary: "Replace a webhook's secret",
    handler: inAccount(async (id, req, app) =>
      ok(await rotateSecret(app.sql, id, idParam(req, 'webhook_id'), app.config.webhookSecretGraceSeconds)),
    ),
  },
  {
    name: 'disable-webhook',
    reply: { status: 200, body: Webhook },
    method: 'POST',
    path: `${A}/:id/webhooks/:webhook_id/disable`,
    summary: 'Disable a webhook: its deliveries are held until it is enabled again',
    handler: inAccount(async (id, req, app) => ok(await disableWebhook(app.sql, id, idParam(req, 'webhook_id')))),
  },
  {
    name: 'enable-webhook',
    reply: { status: 200, body: EnabledWebhook },
    method: 'POST',
    path: `${A}/:id/webhooks/:webhook_id/enable`,
    summary: 'Enable a webhook again and send the deliveries held while it was disabled',
    handler: inAccount(async (id, req, app) => ok(await enableWebhook(app.sql, id, idParam(req, 'webhook_id')))),
  },
  {
    name: 'list-deliveries',
    reply: { status: 200, body: v.array(Delivery) },
    query: DeliveryQuery,
    method: 'GET',
    path: `${A}/:id/webhooks/:webhook_id/deliveries`,
    summary: "List a webhook's deliveries with their attempts (?limit=, newest first)",
    handler: inAccount(async (id, req, app) =>
      ok(
        await listDeliveries(
          app.sql,
          id,
          idParam(req, 'webhook_id'),
          (req.queryInput as QueryOf<typeof DeliveryQuery>).limit,
        ),
      ),
    ),
  },
  {
    name: 'redeliver',
    reply: { status: 202, body: Redelivery },
    method: 'POST',
    path: `${A}/:id/webhooks/:webhook_id/deliveries/:delivery_id/redeliver`,
    summary: 'Send a delivery again (3 more attempts)',
    handler: inAccount(async (id, req, app) =>
      ok(await redeliver(app.sql, id, idParam(req, 'webhook_id'), idParam(req, 'delivery_id')), 202),
    ),
  },
  {
    name: 'recover-deliveries',
    reply: { status: 202, body: Recovery },
    method: 'POST',
    path: `${A}/:id/webhooks/:webhook_id/recover`,
    summary: 'Send again, in their original order, the deliveries that failed since a time',
    body: RecoverBody,
    handler: inAccount(async (id, req, app) =>
      ok(await recover(app.sql, id, idParam(req, 'webhook_id'), (req.input as { since: string }).since), 202),
    ),
  },
]

export const adminRoutes: Route[] = ops.map((op) => ({ ...op, auth: 'admin', tag: 'admin' }))

// An admin operation run directly (the CLI): the same validation and handler as over HTTP, with
// path parameters and query parameters from flags and the JSON body as text.
export const invokeAdmin = async (route: Route, params: Record<string, string>, body: string, app: App) => {
  const req: Req = {
    id: 'cli',
    method: route.method,
    url: 'http://cli/',
    headers: {},
    body: Buffer.from(body),
    params,
    query: { ...params },
  }
  try {
    return { ok: true, body: (await invoke(route, req, app)).body }
  } catch (err) {
    if (!(err instanceof Refusal)) throw err
    return { ok: false, body: refusalReply(err).body }
  }
}
