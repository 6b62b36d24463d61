import { timingSafeEqual } from 'node:crypto'
import type { Actor } from '../audit/entries.ts'
import { refuse } from '../errors.ts'
import type { App } from '../context.ts'
import { hashToken, WINDOW_MS, type Scope } from '../db/key-check.ts'
import type { Req, Route } from '../route.ts'

// Tokens are sk_<account id>_<secret>: the account id lets the lookup stay inside one tenant.
const accountOf = (token: string) => {
  const m = /^sk_(\d{1,15})_[A-Za-z0-9_-]{20,200}$/.exec(token)
  return m ? Number(m[1]) : null
}

interface KeyRules {
  scope: Scope
  limit: number
  bucket: string
  badKeyStatus: 401 | 403
}

export const rulesFor = (scope: Scope, app: App): KeyRules =>
  scope === 'track'
    ? { scope, limit: app.config.trackRateLimit, bucket: 'track', badKeyStatus: 401 }
    : { scope, limit: app.config.apiRateLimit, bucket: 'api', badKeyStatus: 403 }

const serviceKey = (req: Req) => {
  const header = req.headers['service-key']
  return Array.isArray(header) ? header[0] : header
}

// Missing header -> 401; unknown or revoked -> 403 (401 on tracking);
// lacking the scope -> 403; over the per-key rate -> 429 with Retry-After and RateLimit-*.
// `token`: the key as the route takes it, when not in the service-key header (Segment's Basic user).
export const authenticateKey = async (req: Req, app: App, rules: KeyRules, token = serviceKey(req)) => {
  if (!token) return refuse(401, 'The service-key header is missing.')
  const accountId = accountOf(token)
  if (accountId === null) return refuse(rules.badKeyStatus, 'The service-key is not valid.')
  const counted = await app.keys.count(accountId, token, rules.bucket)
  if (!counted || counted.key.revoked_at) return refuse(rules.badKeyStatus, 'The service-key is not valid.')
  const { key, count, windowStart } = counted
  const reset = Math.max(1, Math.ceil((windowStart + WINDOW_MS - Date.now()) / 1000))
  req.replyHeaders = {
    'ratelimit-limit': String(rules.limit),
    'ratelimit-remaining': String(Math.max(0, rules.limit - count)),
    'ratelimit-reset': String(reset),
  }
  if (!key.scopes.includes(rules.scope)) return refuse(403, `The key lacks the '${rules.scope}' scope.`)
  if (count > rules.limit) {
    return refuse(429, `More than ${rules.limit} requests per minute for this key.`, undefined, {
      ...req.replyHeaders,
      'retry-after': String(reset),
    })
  }
  req.auth = { accountId, keyId: key.id, keyName: key.name }
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
}

const OPERATOR: Actor = { type: 'operator', id: null, name: 'operator' }

// Who made a request, from what authenticated it (the audit log's actor): the operator on an admin
// row (the admin token, or the CLI that runs the same rows), else the request's key; none on a row
// that takes no authentication.
export const actorOf = (route: Route, req: Req): Actor | undefined =>
  route.auth === 'admin' ? OPERATOR : req.auth ? { type: 'key', id: req.auth.keyId, name: req.auth.keyName } : undefined
