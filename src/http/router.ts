import { Router } from 'itty-router'
import type { App } from '../context.ts'
import { isDatabaseAway } from '../db/sqlstate.ts'
import { Refusal } from '../errors.ts'
import { parse } from '../validate.ts'
import { authenticateAdmin, authenticateKey, rulesFor } from './auth.ts'
import { problem, refusalReply } from './problem.ts'
import { checkQuery, readJson, requireJsonExchange, requireUtf8 } from './request.ts'
import type { Reply, Req, Route } from './types.ts'

const run =
  (route: Route) =>
  async (req: Req, app: App): Promise<Reply> => {
    if (route.auth === 'admin') authenticateAdmin(req, app)
    else if (route.auth !== 'none') await authenticateKey(req, app, rulesFor(route.auth.key, app))
    if (route.jsonOnly) requireJsonExchange(req)
    if (route.body) requireUtf8(req, route.jsonOnly ? 406 : 415)
    checkQuery(req)
    return invoke(route, req, app)
  }

// Validates the body into req.input, then runs the handler (also used by the CLI).
export const invoke = (route: Route, req: Req, app: App) => {
  if (route.body) req.input = parse(route.body, readJson(req))
  return route.handler(req, app)
}

// Built once from the routing table. A path that exists under other methods answers 405 with
// Allow; anything else unmatched is 404.
export const buildRouter = (routes: Route[], app: App) => {
  const router = Router<Req, [App], Reply>({
    catch: (err: unknown, req: Req) => {
      if (err instanceof Refusal) return refusalReply(err)
      if (isDatabaseAway(err))
        return problem(503, 'The database is not reachable; try again shortly.', undefined, { 'retry-after': '1' })
      app.log('error', 'handler failed', { id: req.id, route: req.route, error: String((err as Error)?.stack ?? err) })
      return problem(500, 'An internal error occurred.')
    },
    finally: [
      (reply: Reply, req: Req) => {
        if (reply && req.replyHeaders) reply.headers = { ...req.replyHeaders, ...reply.headers }
        return reply
      },
    ],
  })
  for (const route of routes) {
    ;(router as unknown as Record<string, (path: string, h: unknown) => void>)[route.method.toLowerCase()](
      route.path,
      run(route),
    )
  }
  const patterns = router.routes.map(([method, regex]) => ({ method, regex }))
  return async (req: Req): Promise<Reply> => {
    const reply = await router.fetch(req, app)
    if (reply) return reply
    const path = new URL(req.url).pathname
    const allow = [...new Set(patterns.filter((p) => p.regex.test(path)).map((p) => p.method))]
    return allow.length
      ? problem(405, `Use ${allow.join(', ')} for this path.`, undefined, { allow: allow.join(', ') })
      : problem(404, 'No such route.')
  }
}
