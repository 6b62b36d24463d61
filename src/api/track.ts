import { listEvents } from '../admin/events.ts'
import { textParam } from '../route.ts'
import type { Handler, QueryOf } from '../route.ts'
import type { EventQuery } from './schemas.ts'
import { receiveEvents } from '../tracking/intake.ts'
import { eventsToStore, type TrackBody } from '../tracking/schemas.ts'

export const track: Handler = async (req, app) => {
  const { trackerKey, events } = req.input as TrackBody
  await receiveEvents(app, req.auth!.accountId, trackerKey, eventsToStore(req.json))
  return { status: 200, body: { status: 'received', events: events.length } }
}

// The latest events tracked for one external id (matched to a customer or not), for the key's account.
export const customerEvents: Handler = async (req, app) => {
  const { limit } = req.queryInput as QueryOf<typeof EventQuery>
  return { status: 200, body: await listEvents(app.sql, req.auth!.accountId, textParam(req, 'external_id'), limit) }
}
