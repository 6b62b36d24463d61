import * as v from 'valibot'
import { accountIn } from '../accounts/accounts.ts'
import { idParam, noContent, ok, type Req, type Route, route } from '../route.ts'
import { listDeliveries, RecoverBody, recover, redeliver } from './deliveries.ts'
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
} from './endpoints.ts'
import { listEventTypes } from './events.ts'
import {
  Delivery,
  DeliveryQuery,
  EnabledWebhook,
  EventType,
  NewWebhook,
  Recovery,
  Redelivery,
  TestDelivery,
  Webhook,
  WebhookSecret,
} from './schemas.ts'

const HOOKS = '/admin/v1/accounts/:id/webhooks'
const HOOK = `${HOOKS}/:webhook_id`
const webhookId = (req: Req) => idParam(req, 'webhook_id')

export const webhookRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/admin/v1/event-types',
    auth: 'admin',
    name: 'list-event-types',
    summary: 'The events a webhook can subscribe to, with their payload schemas and examples',
    reply: { status: 200, body: v.array(EventType) },
    handler: () => ok(listEventTypes()),
  }),
  route({
    method: 'POST',
    path: HOOKS,
    auth: 'admin',
    name: 'add-webhook',
    summary: 'Subscribe a webhook (the secret is shown only here)',
    body: WebhookBody,
    reply: { status: 201, body: NewWebhook },
    handler: async (req, app) =>
      ok(
        await addWebhook(
          app.sql,
          await accountIn(req, app),
          req.input,
          app.config.webhookAllowPrivate,
        ),
        201,
      ),
  }),
  route({
    method: 'PATCH',
    path: HOOK,
    auth: 'admin',
    name: 'update-webhook',
    summary: "Change a webhook's events, name or rate limit",
    body: WebhookPatch,
    example: { events: ['customer.created', 'customer.score_changed'], rate_limit: 10 },
    reply: { status: 200, body: Webhook },
    handler: async (req, app) =>
      ok(await updateWebhook(app.sql, await accountIn(req, app), webhookId(req), req.input)),
  }),
  route({
    method: 'POST',
    path: `${HOOK}/test`,
    auth: 'admin',
    name: 'test-webhook',
    summary: "Send an event's catalog example to a webhook, signed like every delivery",
    body: TestSendBody,
    example: { event: 'customer.score_changed' },
    refusals: [409],
    reply: { status: 202, body: TestDelivery },
    handler: async (req, app) =>
      ok(await testSend(app.sql, await accountIn(req, app), webhookId(req), req.input.event), 202),
  }),
  route({
    method: 'GET',
    path: HOOKS,
    auth: 'admin',
    name: 'list-webhooks',
    summary: 'List webhooks',
    reply: { status: 200, body: v.array(Webhook) },
    handler: async (req, app) => ok(await listWebhooks(app.sql, await accountIn(req, app))),
  }),
  route({
    method: 'DELETE',
    path: HOOK,
    auth: 'admin',
    name: 'remove-webhook',
    summary: 'Remove a webhook',
    reply: { status: 204 },
    handler: async (req, app) => {
      await removeWebhook(app.sql, await accountIn(req, app), webhookId(req))
      return noContent
    },
  }),
  route({
    method: 'POST',
    path: `${HOOK}/rotate-secret`,
    auth: 'admin',
    name: 'rotate-secret',
    summary: "Replace a webhook's secret",
    reply: { status: 200, body: WebhookSecret },
    handler: async (req, app) =>
      ok(
        await rotateSecret(
          app.sql,
          await accountIn(req, app),
          webhookId(req),
          app.config.webhookSecretGraceSeconds,
        ),
      ),
  }),
  route({
    method: 'POST',
    path: `${HOOK}/disable`,
    auth: 'admin',
    name: 'disable-webhook',
    summary: 'Disable a webhook: its deliveries are held until it is enabled again',
    reply: { status: 200, body: Webhook },
    handler: async (req, app) =>
      ok(await disableWebhook(app.sql, await accountIn(req, app), webhookId(req))),
  }),
  route({
    method: 'POST',
    path: `${HOOK}/enable`,
    auth: 'admin',
    name: 'enable-webhook',
    summary: 'Enable a webhook again and send the deliveries held while it was disabled',
    reply: { status: 200, body: EnabledWebhook },
    handler: async (req, app) =>
      ok(await enableWebhook(app.sql, await accountIn(req, app), webhookId(req))),
  }),
  route({
    method: 'GET',
    path: `${HOOK}/deliveries`,
    auth: 'admin',
    name: 'list-deliveries',
    summary: "List a webhook's deliveries with their attempts (?limit=, newest first)",
    query: DeliveryQuery,
    reply: { status: 200, body: v.array(Delivery) },
    handler: async (req, app) =>
      ok(
        await listDeliveries(
          app.sql,
          await accountIn(req, app),
          webhookId(req),
          req.queryInput.limit,
        ),
      ),
  }),
  route({
    method: 'POST',
    path: `${HOOK}/deliveries/:delivery_id/redeliver`,
    auth: 'admin',
    name: 'redeliver',
    summary: 'Send a delivery again (3 more attempts)',
    reply: { status: 202, body: Redelivery },
    handler: async (req, app) =>
      ok(
        await redeliver(
          app.sql,
          await accountIn(req, app),
          webhookId(req),
          idParam(req, 'delivery_id'),
        ),
        202,
      ),
  }),
  route({
    method: 'POST',
    path: `${HOOK}/recover`,
    auth: 'admin',
    name: 'recover-deliveries',
    summary: 'Send again, in their original order, the deliveries that failed since a time',
    body: RecoverBody,
    reply: { status: 202, body: Recovery },
    handler: async (req, app) =>
      ok(await recover(app.sql, await accountIn(req, app), webhookId(req), req.input.since), 202),
  }),
]
