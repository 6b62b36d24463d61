import type { App } from '../context.ts'
import type { Tx } from '../db/client.ts'
import type { AccountPayload } from '../db/jobs.ts'
import { relayTracks } from './relay/tracks.ts'
import { applyTrackerBatch, drainTracker, trackerJob } from './tracker/apply.ts'

// The tracker's apply job as it runs: its one seam, for the events that wait for another
// intake's job (`Relayed`, tracker/apply.ts), holds the relay's tracks (relay/tracks.ts).
// The tracker imports no relay file; the relay's job drains the tracker's events through here
// after its own messages.
export const applyEvents = (tx: Tx, accountId: number) =>
  applyTrackerBatch(tx, accountId, relayTracks)
export const drainEvents = (app: App, accountId: number) =>
  drainTracker(app, accountId, relayTracks)
export const applyEventsOfAccount = (app: App, payload: AccountPayload) =>
  trackerJob(app, payload, relayTracks)
