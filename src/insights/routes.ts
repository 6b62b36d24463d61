import * as v from 'valibot'
import { ok, type Route, route } from '../route.ts'
import { WeekReport } from './schemas.ts'
import { PERIODS } from './statements.ts'
import { weekReport } from './week.ts'

// Also for 7.0 or 07, which are not numbers here (validate.ts QUERY_INTEGER).
const PERIOD = 'Must be 7 or 30.'

export const insightRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/insights/week',
    auth: { key: 'search' },
    query: {
      days: {
        description: 'The period: 7 (the default) or 30 days.',
        schema: v.optional(v.pipe(v.number(PERIOD), v.picklist(PERIODS, PERIOD)), 7),
      },
    },
    refusals: [422],
    name: 'week-report',
    tag: 'insights',
    summary: '"This week": movements, renewals ahead and 12 weeks of health, each with its search',
    reply: { status: 200, body: WeekReport },
    expensive: true,
    handler: async (req, app) =>
      ok(await weekReport(app, req.auth.accountId, req.queryInput.days, req)),
  }),
]
