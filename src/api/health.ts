import { ping } from '../db/client.ts'
import { problem } from '../http/problem.ts'
import { route, type Route } from '../route.ts'
import * as v from 'valibot'

const Status = <T extends string>(status: T) => v.object({ status: v.literal(status) })

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
    summary: 'Readiness: the database answers',
    // On the main pool (point reads and writes), never on one that expensive queries can fill.
    handler: async (_req, app) => {
      try {
        await Promise.race([ping(app.sql), new Promise((_, reject) => setTimeout(reject, 2000).unref())])
        return { status: 200, body: { status: 'ready' } }
      } catch {
        return problem(503, 'The database is not reachable.')
      }
    },
  }),
]
