import { Router } from 'itty-router'
import type { Config } from '../config.ts'
import type { App } from '../context.ts'
import { isDatabaseAway } from '../db/sqlstate.ts'
import { Refusal, refuse } from '../errors.ts'
import { parse } from '../validate.ts'
import { CLIENT_GONE, isStream, ORIGIN } from './adapter.ts'
import { createPermits, createShares, LARGE_BODY_BYTES } from './permits.ts'
import { audited, inChange } from './audit.ts'
import {
  authenticateAdmin,
  authenticateKey,
  authenticateSession,
  bySession,
  rulesFor,
} from './auth.ts'
import { problem, refusalReply } from './problem.ts'
import { checkQuery, parseQuery, readJson, requireJsonExchange, requireUtf8 } from './request.ts'
import type { Credential, Reply, Req, Route } from '../route.ts'

const largeBodies = createPermits(1)

const checked = (route: Route, req: Req, app: App) => {
  if (route.jsonOnly) requireJsonExchange(req)
  if (route.body) requireUtf8(req, route.jsonOnly ? 406 : 415)
  checkQuery(req)
  return route.body && req.body.length >= LARGE_BODY_BYTES
    ? largeBodies(() => invoke(route, req, app))
    : invoke(route, req, app)
}

type Share = (route: Route, req: Req, app: App, accountId: number) => Reply | Promise<Reply>

// An expensive route runs within its account's share of this process (createShares); the place
// is given back when it answers (a streamed answer: when its stream ends) or when its client goes,
// whichever comes first.
const withinShare = ({
  expensivePerAccount: limit,
  expensiveWaiting: waiting,
  expensiveWaitMs: ms,
}: Config) => {
  const take = createShares(limit, waiting, ms)
  return async (route: Route, req: Req, app: App, accountId: number) => {
    const queued = performance.now()
    const release =
      (await take(accountId, req.signal)) ??
      refuse(
        429,
        `An account runs at most ${limit} searches, aggregates and segment searches at once, and ${waiting} ` +
          `more wait up to ${ms} ms for a place; retry when one has answered.`,
        undefined,
        { ...req.replyHeaders, 'retry-after': '1' },
      )
    req.waitedMs = performance.now() - queued
    req.signal?.addEventListener('abort', release, { once: true })
    let streaming = false
    try {
      const reply = await checked(route, req, app)
      if (!isStream(reply.body)) return reply
      // A streamed answer (an export) answers when its stream ends.
      streaming = true
      return { ...reply, body: releasing(reply.body, release) }
    } finally {
      if (!streaming) release()
    }
  }
}

async function* releasing(chunks: AsyncIterable<string>, release: () => void) {
  try {
    yield* chunks
  } finally {
    release()
  }
}

// A 'basic-user-or-body-field' credential (route.ts): the HTTP Basic user name, or the body's field
// (the body is read here, once: invoke() takes req.json as it is); both given, they must name the
// same key, else neither is trusted. A route without a body takes the Basic user, else the
// service-key header.
const basicUserOrBodyField = (req: Req, route: Route, { field }: Credential) => {
  const basic = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1]
  const user = basic ? Buffer.from(basic, 'base64').toString('utf8').split(':')[0] : ''
  if (!route.body) return user || undefined
  const body = (req.json ??= readJson(req))
  const given =
    body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[field] : undefined
  const inBody = typeof given === 'string' && given ? given : ''
  if (user && inBody && inBody !== user)
    refuse(
      400,
      `The Basic user name and ${field} name different keys: give one key, or the same in both.`,
      [{ path: `/${field}`, message: 'Differs from the key of the Authorization header.' }],
    )
  return user || inBody || refuse(401, `Give the API key as the Basic user name or as ${field}.`)
}

// Synchronous unless the route needs the key store or its handler is async. An admin route runs on
// the admin pool (App.admin), in place of the api pools of the service-key routes.
const run =
  (route: Route, share: Share) =>
  (req: Req, app: App): Reply | Promise<Reply> => {
    if (route.auth === 'admin') {
      authenticateAdmin(req, app)
      return checked(route, req, { ...app, sql: app.admin, heavy: app.admin })
    }
    if (route.auth === 'session')
      return authenticateSession(req, app).then(() => checked(route, req, app))
    if (route.auth !== 'none') {
      const need = route.auth.key
      const rules = rulesFor(need, app)
      const { credential } = route.auth
      const token = credential ? basicUserOrBodyField(req, route, credential) : undefined
      const holder = bySession(req, !!credential)
        ? authenticateSession(req, app, need)
        : authenticateKey(req, app, rules, token)
      return holder.then(({ accountId }) =>
        route.expensive ? share(route, req, app, accountId) : checked(route, req, app),
      )
    }
    return checked(route, req, app)
  }

const validate = (route: Route, req: Req) => {
  if (route.query) req.queryInput = parseQuery(route.query, req.query)
  if (route.body) req.input = parse(route.body, (req.json ??= readJson(req)))
}

// Parses the query into req.queryInput and validates the body into req.input, then runs the
// handler (also used by the CLI); a change runs in one transaction with its audit entry (audit.ts).
export const invoke = (route: Route, req: Req, app: App) => {
  if (audited(route))
    return inChange(
      route,
      req,
      app,
      () => validate(route, req),
      (joined) => route.handler(req, joined),
    )
  validate(route, req)
  return route.handler(req, app)
}

// A path of letters, digits, '_', '-' and inner dots reads the same raw as after WHATWG URL
// parsing, so such a route can be found by its text.
const STATIC_PATH = /^(\/[\w-]+(\.[\w-]+)*)+$/

// The adapter answers HEAD wherever GET is answered.
const headToo = (method: string) => (method === 'GET' ? ['GET', 'HEAD'] : [method])

// Built once from the routing table. A path that exists under other methods answers 405 with
// Allow; anything else unmatched is 404. A request whose path is exactly that of a static route
// (no query) is found in a Map rather than by itty-router's URL parsing and regex scan, and is
// answered as itty-router would answer it, in the same tick when the route's work is synchronous.
export const buildRouter = (routes: Route[], app: App) => {
  const fail = (err: unknown, req: Req): Reply => {
    // Work cut short because its client went (a cancelled query): no one to answer, nothing wrong.
    if (req.signal?.aborted) return { status: CLIENT_GONE }
    if (err instanceof Refusal) return refusalReply(err)
    if (isDatabaseAway(err))
      return problem(503, 'The database is not reachable; try again shortly.', undefined, {
        'retry-after': '1',
      })
    app.log('error', 'handler failed', {
      id: req.id,
      route: req.route,
      error: String((err as Error)?.stack ?? err),
    })
    return problem(500, 'An internal error occurred.')
  }
  const withReplyHeaders = (reply: Reply, req: Req) => {
    if (reply && req.replyHeaders)
      reply.headers = Object.assign({}, req.replyHeaders, reply.headers)
    return reply
  }
  const router = Router<Req, [App], Reply>({ catch: fail, finally: [withReplyHeaders] })
  // A table without expensive rows (a bench's) needs no shares, nor the config that sizes them.
  const share: Share = routes.some((r) => r.expensive) ? withinShare(app.config) : checked
  const runners = routes.map((route) => run(route, share))
  routes.forEach((route, i) => {
    ;(router as unknown as Record<string, (path: string, h: unknown) => void>)[
      route.method.toLowerCase()
    ](route.path, runners[i])
  })
  const patterns = router.routes.map(([method, regex]) => ({ method, regex }))
  // method -> path -> the route and its pattern, for static routes that no earlier route matches.
  const exact = new Map<string, Map<string, { run: ReturnType<typeof run>; pattern: string }>>()
  routes.forEach((route, i) => {
    const [method, regex, , pattern] = router.routes[i]
    const earlier = router.routes
      .slice(0, i)
      .some(([m, r]) => (m === method || m === 'ALL') && r.test(route.path))
    if (!STATIC_PATH.test(route.path) || !regex.test(route.path) || earlier) return
    const paths = exact.get(method) ?? new Map()
    exact.set(method, paths.set(route.path, { run: runners[i], pattern }))
  })
  const unmatched = (req: Req) => {
    const path = new URL(req.url).pathname
    const allow = [
      ...new Set(patterns.filter((p) => p.regex.test(path)).flatMap((p) => headToo(p.method))),
    ]
    return allow.length
      ? problem(405, `Use ${allow.join(', ')} for this path.`, undefined, {
          allow: allow.join(', '),
        })
      : problem(404, 'No such route.')
  }
  return (req: Req): Reply | Promise<Reply> => {
    const hit = req.url.startsWith(ORIGIN)
      ? exact.get(req.method)?.get(req.url.slice(ORIGIN.length))
      : undefined
    if (!hit) return router.fetch(req, app).then((reply) => reply ?? unmatched(req))
    req.params = {}
    req.query = Object.create(null)
    req.route = hit.pattern
    let reply: Reply | Promise<Reply>
    try {
      reply = hit.run(req, app)
    } catch (err) {
      return withReplyHeaders(fail(err, req), req)
    }
    return reply instanceof Promise
      ? reply.then(
          (done) => withReplyHeaders(done, req),
          (err) => withReplyHeaders(fail(err, req), req),
        )
      : withReplyHeaders(reply, req)
  }
}
