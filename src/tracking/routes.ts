import { accountIn } from '../accounts/accounts.ts'
import * as v from 'valibot'
import { type KeyAuth, noContent, ok, type Route, route, textParam } from '../route.ts'
import { listEvents } from './tracker/events.ts'
import { receiveEvents } from './tracker/intake.ts'
import { liftSuppression, listSuppressions, Suppression } from './suppressions.ts'
import { EventQuery, Events, eventsToStore, TrackAccepted, TrackBody } from './tracker/schemas.ts'
import { receiveRelay } from './relay/intake.ts'
import { TYPES } from './relay/message.ts'
import { IngestStatus, RelayAccepted, RelayBatch, RelayMessage } from './relay/schemas.ts'
import { ingestStatus } from './relay/status.ts'

// The relay's routes take the key as Segment's SDKs send their write key.
const WRITE_KEY: KeyAuth = {
  key: 'track',
  credential: {
    source: 'basic-user-or-body-field',
    field: 'writeKey',
    scheme: {
      name: 'segmentWriteKey',
      description:
        'The Segment HTTP Tracking API routes (`/v1/...`) and the ingest status: an API key of scope `track` as the ' +
        'user name, with an empty password, as Segment SDKs send their write key; `writeKey` in the body is ' +
        'accepted too, and given with the user name must name the same key (else 400).',
    },
  },
}

export const trackingRoutes: Route[] = [
  // The latest events tracked for one external id (matched to a customer or not), for
  // the key's account.
  route({
    method: 'GET',
    path: '/api/v1/customer/:external_id/events',
    auth: { key: 'search' },
    query: { limit: EventQuery.limit },
    name: 'customer-events',
    tag: 'tracking',
    summary:
      'The latest events tracked for a customer, newest first, with counts by state (?limit=)',
    reply: { status: 200, body: Events },
    handler: async (req, app) =>
      ok(
        await listEvents(
          app.sql,
          req.auth.accountId,
          textParam(req, 'external_id'),
          req.queryInput.limit,
        ),
      ),
  }),
  route({
    method: 'POST',
    path: '/api/tracker/track',
    auth: { key: 'track' },
    body: TrackBody,
    name: 'track',
    tag: 'tracking',
    unaudited: 'intake',
    summary: 'Track server-side events',
    reply: { status: 200, body: TrackAccepted },
    example: {
      trackerKey: 'CS-7Q2KD9XZ',
      events: [
        {
          name: 'report.exported',
          timestamp: 1795000000000,
          identification: { customer: 'acme-1', contact: 'pat' },
          data: { customer: { plan: 'pro' } },
        },
      ],
    },
    // What is stored is the events as sent (req.json), once the schema has checked them.
    handler: async (req, app) => {
      await receiveEvents(app, req.auth.accountId, req.input.trackerKey, eventsToStore(req.json))
      return ok({ status: 'received', events: req.input.events.length })
    },
  }),
  route({
    method: 'GET',
    path: '/admin/v1/accounts/:id/events',
    auth: 'admin',
    name: 'list-events',
    reply: { status: 200, body: Events },
    query: EventQuery,
    summary: 'Count and list recent tracking events (?customer=&limit=, newest first)',
    handler: async (req, app) =>
      ok(
        await listEvents(
          app.sql,
          await accountIn(req, app),
          req.queryInput.customer,
          req.queryInput.limit,
        ),
      ),
  }),
  route({
    method: 'GET',
    path: '/api/v1/ingest/status',
    auth: WRITE_KEY,
    name: 'ingest-status',
    tag: 'tracking',
    summary:
      "The account's Segment ingest: counts by type and by reason dropped, dropped trait keys, last errors",
    reply: { status: 200, body: IngestStatus },
    handler: async (req, app) => ok(await ingestStatus(app.sql, req.auth.accountId)),
  }),
  route({
    method: 'GET',
    path: '/admin/v1/accounts/:id/ingest',
    auth: 'admin',
    name: 'account-ingest-status',
    summary:
      "An account's Segment ingest: counts by type and by reason dropped, dropped trait keys, last errors",
    reply: { status: 200, body: IngestStatus },
    handler: async (req, app) => ok(await ingestStatus(app.sql, await accountIn(req, app))),
  }),
]

// The Segment HTTP Tracking API (docs/api.md, "Segment-compatible ingest"): what Segment's and
// RudderStack's SDKs send, unchanged. Size limits and unreadable JSON are 400s; a problem in one
// message is counted in the ingest status, never a refusal.
export const relayRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/v1/batch',
    auth: WRITE_KEY,
    body: RelayBatch,
    name: 'segment-batch',
    unaudited: 'intake',
    tag: 'tracking',
    summary:
      'Segment HTTP Tracking API: a batch of messages (200 once stored; applied in the background)',
    reply: { status: 200, body: RelayAccepted },
    example: {
      batch: [
        {
          type: 'group',
          messageId: 'm-1',
          userId: 'pat',
          groupId: 'acme-1',
          traits: { name: 'Acme', plan: 'pro' },
        },
        {
          type: 'track',
          messageId: 'm-2',
          userId: 'pat',
          event: 'report.exported',
          properties: { rows: 12 },
        },
      ],
    },
    handler: async (req, app) =>
      ok(
        await receiveRelay(
          app,
          req.auth.accountId,
          req.body.length,
          req.input.batch,
          undefined,
          req.input,
        ),
      ),
  }),
  ...TYPES.map((type) =>
    route({
      method: 'POST',
      path: `/v1/${type}`,
      auth: WRITE_KEY,
      body: RelayMessage,
      name: `segment-${type}`,
      tag: 'tracking',
      unaudited: 'intake',
      summary: `Segment HTTP Tracking API: one ${type} message (200 once stored; applied in the background)`,
      reply: { status: 200, body: RelayAccepted },
      handler: async (req, app) =>
        ok(await receiveRelay(app, req.auth.accountId, req.body.length, [req.input], type)),
    }),
  ),
]

// Suppressions of erased people (tracking/suppressions.ts), listed after every older
// row of the table.
export const suppressionRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/suppressions',
    auth: { key: 'erase' },
    name: 'list-suppressions',
    tag: 'privacy',
    summary:
      "The account's suppressions: erased external ids whose tracked events are dropped (hashed)",
    reply: { status: 200, body: v.array(Suppression) },
    handler: async (req, app) => ok(await listSuppressions(app.sql, req.auth.accountId)),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/suppressions/:entity/:external_id',
    auth: { key: 'erase' },
    name: 'lift-suppression',
    tag: 'privacy',
    summary:
      'Lift the suppression of a customer or contact external id: its tracked events apply again',
    reply: { status: 204 },
    handler: async (req, app) => (
      await liftSuppression(
        app.sql,
        req.auth.accountId,
        req.params.entity,
        textParam(req, 'external_id'),
      ),
      noContent
    ),
  }),
]
