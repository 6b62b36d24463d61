import { accountIn } from '../accounts/accounts.ts'
import * as v from 'valibot'
import { noContent, ok, type Route, route, textParam } from '../route.ts'
import { listEvents } from './events.ts'
import { receiveEvents } from './intake.ts'
import { liftSuppression, listSuppressions, Suppression } from './suppressions.ts'
import { EventQuery, Events, eventsToStore, TrackAccepted, TrackBody } from './schemas.ts'

export const trackingRoutes: Route[] = [
  // The latest events tracked for one external id (matched to a customer or not), for the key's account.
  route({
    method: 'GET',
    path: '/api/v1/customer/:external_id/events',
    auth: { key: 'search' },
    query: { limit: EventQuery.limit },
    name: 'customer-events',
    tag: 'tracking',
    summary: 'The latest events tracked for a customer, newest first, with counts by state (?limit=)',
    reply: { status: 200, body: Events },
    handler: async (req, app) =>
      ok(await listEvents(app.sql, req.auth.accountId, textParam(req, 'external_id'), req.queryInput.limit)),
  }),
  route({
    method: 'POST',
    path: '/api/tracker/track',
    auth: { key: 'track' },
    body: TrackBody,
    name: 'track',
    tag: 'tracking',
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
    tag: 'admin',
    name: 'list-events',
    reply: { status: 200, body: Events },
    query: EventQuery,
    summary: 'Count and list recent tracking events (?customer=&limit=, newest first)',
    handler: async (req, app) =>
      ok(await listEvents(app.sql, await accountIn(req, app), req.queryInput.customer, req.queryInput.limit)),
  }),
]

// Suppressions of erased people (tracking/suppressions.ts), listed after every older row of the table.
export const suppressionRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/suppressions',
    auth: { key: 'erase' },
    name: 'list-suppressions',
    tag: 'privacy',
    summary: "The account's suppressions: erased external ids whose tracked events are dropped (hashed)",
    reply: { status: 200, body: v.array(Suppression) },
    handler: async (req, app) => ok(await listSuppressions(app.sql, req.auth.accountId)),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/suppressions/:entity/:external_id',
    auth: { key: 'erase' },
    name: 'lift-suppression',
    tag: 'privacy',
    summary: 'Lift the suppression of a customer or contact external id: its tracked events apply again',
    reply: { status: 204 },
    handler: async (req, app) => (
      await liftSuppression(app.sql, req.auth.accountId, req.params.entity, textParam(req, 'external_id')), noContent
    ),
  }),
]
