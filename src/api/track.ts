import type { Handler } from '../http/types.ts'
import { receiveEvents } from '../tracking/intake.ts'
import { checkRawEvents, type TrackBody } from '../tracking/schemas.ts'

export const track: Handler = async (req, app) => {
  const { trackerKey, events } = req.input as TrackBody
  checkRawEvents(req.body)
  await receiveEvents(app, req.auth!.accountId, trackerKey, req.body)
  return { status: 200, body: { status: 'received', events: events.length } }
}
