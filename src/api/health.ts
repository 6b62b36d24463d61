import { problem } from '../http/problem.ts'
import type { Route } from '../http/types.ts'

export const healthRoutes: Route[] = [
  {
    method: 'GET',
    path: '/healthz',
    auth: 'none',
    summary: 'Liveness: the process answers',
    handler: () => ({ status: 200, body: { status: 'ok' } }),
  },
  {
    method: 'GET',
    path: '/readyz',
    auth: 'none',
    summary: 'Readiness: the database answers',
    handler: async (_req, app) => {
      try {
        await Promise.race([app.sql`select 1`, new Promise((_, reject) => setTimeout(reject, 2000).unref())])
        return { status: 200, body: { status: 'ready' } }
      } catch {
        return problem(503, 'The database is not reachable.')
      }
    },
  },
]
