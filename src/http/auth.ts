import { timingSafeEqual } from 'node:crypto'
import { refuse } from '../errors.ts'
import type { App } from '../context.ts'
import { hashToken, WINDOW_MS } from '../db/key-check.ts'
import { cookieValue, findSession, fromOwnOrigin } from '../people/sessions.ts'
import {
  allows,
  type Actor,
  type Grant,
  OPERATOR,
  ROLE_GRANTS,
  type Req,
  type Route,
} from '../route.ts'

// Tokens are sk_<account id>_<secret>: the account id lets the lookup stay inside one tenant.
const accountOf = (token: string) => {
  const m = /^sk_(\d{1,15})_[A-Za-z0-9_-]{20,200}$/.exec(token)
  return m ? Number(m[1]) : null
}

interface KeyRules {
  scope: Grant
  limit: number
  bucket: string
  badKeyStatus: 401 | 403
}

export const rulesFor = (scope: Grant, app: App): KeyRules =>
  scope === 'track'
    ? { scope, limit: app.config.trackRateLimit, bucket: 'track', badKeyStatus: 401 }
    : { scope, limit: app.config.apiRateLimit, bucket: 'api', badKeyStatus: 403 }

const serviceKey = (req: Req) => {
  const header = req.headers['service-key']
  return Array.isArray(header) ? header[0] : header
}

// Missing header -> 401; unknown or revoked -> 403 (401 on tracking);
// lacking the scope -> 403; over the per-key rate -> 429 with Retry-After and RateLimit-*.
// `token`: the key as the route takes it, when not in the service-key header (a route's
// own credential).
export const authenticateKey = async (
  req: Req,
  app: App,
  rules: KeyRules,
  token = serviceKey(req),
) => {
  if (!token)
    return refuse(
      401,
      rules.scope === 'manage'
        ? 'Sign in as an admin of the account.'
        : 'The service-key header is missing.',
    )
  const accountId = accountOf(token)
  if (accountId === null) return refuse(rules.badKeyStatus, 'The service-key is not valid.')
  const counted = await app.keys.count(accountId, token, rules.bucket)
  if (!counted || counted.key.revoked_at)
    return refuse(rules.badKeyStatus, 'The service-key is not valid.')
  const { key, count, windowStart } = counted
  const reset = Math.max(1, Math.ceil((windowStart + WINDOW_MS - Date.now()) / 1000))
  req.replyHeaders = {
    'ratelimit-limit': String(rules.limit),
    'ratelimit-remaining': String(Math.max(0, rules.limit - count)),
    'ratelimit-reset': String(reset),
  }
  if (!allows(key.scopes, rules.scope))
    return refuse(
      403,
      rules.scope === 'manage'
        ? "Only an admin of the account, signed in, may do this; the operator's admin API can too."
        : `The key lacks the '${rules.scope}' scope.`,
    )
  if (count > rules.limit) {
    return refuse(429, `More than ${rules.limit} requests per minute for this key.`, undefined, {
      ...req.replyHeaders,
      'retry-after': String(reset),
    })
  }
  req.auth = { accountId, keyId: key.id }
  req.actor = { type: 'key', id: key.id, name: key.name }
  return req.auth
}

const SAFE_METHODS = new Set(['GET', 'HEAD'])

// The request carries a session cookie and no key: the session decides (a key given wins, so a
// machine's request is never taken for a person's). A route with a credential of its own takes
// its key that way.
export const bySession = (req: Req, ownCredential = false) =>
  !ownCredential && !req.headers['service-key'] && cookieValue(req.headers.cookie) !== undefined

// A person's session, the same rule as a key's: the route's need is among the role's grants, else
// 403. A request that changes anything also carries the session's CSRF token in x-csrf-token and
// an Origin of the service's own, else 403: SameSite=Lax already keeps the cookie off cross-site
// POSTs, and these hold where it does not (an older browser, a sibling subdomain).
// `need` undefined: any role (sign-out, who am I).
export const authenticateSession = async (req: Req, app: App, need?: Grant) => {
  const session = await findSession(app.sql, cookieValue(req.headers.cookie))
  if (!session) return refuse(401, 'Not signed in, or the session has ended: sign in again.')
  if (need && !allows(ROLE_GRANTS[session.role], need))
    return refuse(403, `The ${session.role} role may not do this.`)
  if (!SAFE_METHODS.has(req.method)) {
    if (!fromOwnOrigin(req.headers.origin, req.headers.host, app.config.publicUrl))
      return refuse(
        403,
        "A signed-in change must come from the service's own pages (the Origin header).",
      )
    const given = String(req.headers['x-csrf-token'] ?? '')
    if (!timingSafeEqual(hashToken(given), hashToken(session.csrfToken)))
      return refuse(403, 'The x-csrf-token header is missing or is not this session’s.')
  }
  req.session = session
  req.auth = { accountId: session.accountId, keyId: null }
  req.actor = { type: 'user', id: session.userId, name: session.name ?? session.email }
  return req.auth
}

export const authenticateAdmin = (req: Req, app: App) => {
  const expected = app.config.adminToken
  const header = req.headers.authorization ?? ''
  const given = header.startsWith('Bearer ') ? header.slice(7) : ''
  // Comparing digests keeps the comparison constant-time whatever the lengths.
  if (!expected || !given || !timingSafeEqual(hashToken(given), hashToken(expected))) {
    refuse(
      401,
      expected
        ? 'A valid admin bearer token is required.'
        : 'The admin API is disabled (SERVICE_ADMIN_TOKEN is not set).',
      undefined,
      { 'www-authenticate': 'Bearer' },
    )
  }
  req.actor = OPERATOR
}

// Who made a request (the audit log's actor), as its authentication found it (req.actor): the
// operator on an admin row (the admin token, or the CLI that runs the same rows).
export const actorOf = (route: Route, req: Req): Actor | undefined =>
  route.auth === 'admin' ? OPERATOR : req.actor
