import { ping } from '../db/client.ts'
import { unreachableWorkers } from '../db/nodes.ts'
import { problem } from '../http/problem.ts'
import { route, type Route } from '../route.ts'
import * as v from 'valibot'
import type { App } from '../context.ts'

const Status = <T extends string>(status: T) => v.object({ status: v.literal(status) })

// A probe answers within this, whatever the database does.
const READY_MS = 2000
// A Citus worker that accepts no connection within this counts as down.
const NODE_MS = 1000
const within = <T>(work: Promise<T>) =>
  Promise.race([work, new Promise<never>((_, reject) => setTimeout(reject, READY_MS).unref())])

// The database answers on the main pool (point reads and writes), never on one that expensive
// queries can fill; on Citus, each worker node answers too (checked on the admin pool: it
// touches every node).
const readiness = async (app: App) => {
  const [db, nodes] = await Promise.allSettled([
    within(ping(app.sql)),
    within(unreachableWorkers(app.admin, NODE_MS)),
  ])
  if (db.status === 'rejected') return problem(503, 'The database is not reachable.')
  if (nodes.status === 'rejected')
    return problem(503, 'The Citus worker nodes could not be checked.')
  const down = nodes.value
  if (down.length) {
    const which = down.length === 1 ? `node ${down[0]} is` : `nodes ${down.join(', ')} are`
    return problem(503, `The Citus worker ${which} not reachable.`)
  }
  return { status: 200, body: { status: 'ready' } }
}

export const healthRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/healthz',
    auth: 'none',
    probe: true,
    name: 'check-liveness',
    tag: 'operations',
    reply: { status: 200, body: Status('ok') },
    summary: 'Liveness: the process answers',
    handler: () => ({ status: 200, body: { status: 'ok' } }),
  }),
  route({
    method: 'GET',
    path: '/readyz',
    auth: 'none',
    probe: true,
    name: 'check-readiness',
    tag: 'operations',
    reply: { status: 200, body: Status('ready') },
    refusals: [503],
    summary: 'Readiness: the database (on Citus, every worker node) answers',
    handler: (_req, app) => readiness(app),
  }),
]
