import * as client from 'openid-client'
import * as v from 'valibot'
import type { App } from '../context.ts'
import type { Sql } from '../db/client.ts'
import { type FieldError, Refusal, refuse } from '../errors.ts'
import { ROLES, type Role } from '../route.ts'
import { describe, storable, strict } from '../validate.ts'
import { checkWebhookTarget } from '../webhooks/ssrf.ts'
import { open, seal } from './sealed.ts'
import { newSecret, readSecret } from './secrets.ts'
import { openSession } from './sessions.ts'

// Single sign-on through OpenID Connect (docs/security.md, "SSO mix-up"). openid-client does the
// protocol: discovery, the authorization code with PKCE (S256), and the checks of the answer
// (state, the `iss` parameter, the ID token's signature, issuer, audience, expiry and nonce). This
// module keeps what it needs between the start and the callback, and decides who signs in.

export const SSO_CALLBACK = '/auth/v1/sso/callback'
// The pending sign-in's row and the cookie that ties it to the browser that started it.
const PENDING = '10 minutes'
const PENDING_SECONDS = 600
export const SSO_COOKIE = 'service_sso_state'

// https, or a loopback http address (tests and providers run on the host): the token exchange sends
// the client secret there. The operator may name a private address; an account admin's issuer also
// passes the webhooks' SSRF rule (accountIssuerRefusal).
const issuerRule = (s: string) => {
  if (!URL.canParse(s)) return false
  const u = new URL(s)
  return (
    !u.search &&
    !u.hash &&
    (u.protocol === 'https:' || (u.protocol === 'http:' && u.hostname === '127.0.0.1'))
  )
}
const Domain = v.pipe(
  v.string(),
  v.trim(),
  v.toLowerCase(),
  v.regex(
    /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
    'a domain name, as example.com',
  ),
)

export const SsoBody = strict({
  issuer: describe(
    v.pipe(
      v.string(),
      v.maxLength(2000),
      v.check(issuerRule, 'an https URL (or http://127.0.0.1:...) without query'),
    ),
    "The provider's issuer identifier; its /.well-known/openid-configuration is read.",
  ),
  client_id: v.pipe(v.string(), v.minLength(1), v.maxLength(255), storable),
  client_secret: v.pipe(v.string(), v.minLength(1), v.maxLength(1000), storable),
  domains: describe(
    v.pipe(v.array(Domain), v.minLength(1), v.maxLength(50)),
    'The email domains that sign in: a verified email of one of them, exactly (no subdomains).',
  ),
  default_role: describe(
    v.picklist(ROLES),
    'The role of a user whom SSO signs in for the first time.',
  ),
})
type SsoInput = v.InferOutput<typeof SsoBody>

// What the API answers: the configuration without its secret.
export const SsoConfig = v.object({
  issuer: v.string(),
  client_id: v.string(),
  domains: v.array(v.string()),
  default_role: v.picklist(ROLES),
})

// An issuer an account admin sets is held to the rule of a webhook's URL: no private, loopback or
// link-local address, by its literal or by what its name resolves to, unless the service allows
// private targets (SERVICE_WEBHOOK_ALLOW_PRIVATE, as local use and the tests do). The service
// itself fetches the issuer's metadata and sends it the client secret, so an issuer inside the
// network would let an account's admin make the service call there.
export const accountIssuerRefusal = async (issuer: string, allowPrivate: boolean) => {
  const problem = await checkWebhookTarget(issuer, allowPrivate)
  if (problem)
    refuse(400, 'The issuer is not allowed.', [
      { path: '/issuer', message: problem.replace(/^url/, 'issuer') },
    ])
}

// The client secret is kept sealed (sealed.ts), bound to the account.
// excluded.updated_at (the insert's default), not now(): Citus refuses a function in DO UPDATE SET.
export const setSso = async (app: App, accountId: number, body: SsoInput) => {
  const secret = seal(app.config.secretKey, body.client_secret, String(accountId))
  const [row] = await app.sql`
    insert into sso_configs (account_id, issuer, client_id, client_secret, domains, default_role)
    values (${accountId}, ${body.issuer}, ${body.client_id}, ${secret},
      ${[...new Set(body.domains)]},
      ${body.default_role})
    on conflict (account_id) do update set issuer = excluded.issuer, client_id = excluded.client_id,
      client_secret = excluded.client_secret, domains = excluded.domains,
      default_role = excluded.default_role,
      updated_at = excluded.updated_at
    returning issuer, client_id, domains, default_role`
  return row
}

export const getSso = async (sql: Sql, accountId: number) => {
  const [row] = await sql`select issuer, client_id, domains, default_role from sso_configs
    where account_id = ${accountId}`
  return row ?? refuse(404, 'This account has no single sign-on.')
}

export const removeSso = async (sql: Sql, accountId: number) => {
  const gone = await sql`delete from sso_configs where account_id = ${accountId} returning 1`
  if (!gone.length) refuse(404, 'This account has no single sign-on.')
}

const ssoOf = async (app: App, accountId: number) => {
  const [row] = await app.sql`select issuer, client_id, client_secret, domains, default_role
    from sso_configs where account_id = ${accountId}`
  if (!row) return undefined
  return {
    ...row,
    client_secret: open(app.config.secretKey, row.client_secret, String(accountId)),
  } as SsoInput & {
    default_role: Role
  }
}

// The provider's metadata, read at each start and callback: a provider that rotates its keys or
// endpoints is followed, and nothing about one account's provider is kept in the process.
const discover = async (sso: SsoInput) => {
  const insecure = new URL(sso.issuer).protocol === 'http:'
  try {
    const config = await client.discovery(
      new URL(sso.issuer),
      sso.client_id,
      undefined,
      client.ClientSecretBasic(sso.client_secret),
      {
        execute: [
          ...(insecure ? [client.allowInsecureRequests] : []),
          client.enableNonRepudiationChecks,
        ],
      },
    )
    return config
  } catch (err) {
    return ssoRefuse(
      'provider_unreachable',
      502,
      `The identity provider's configuration could not be read: ${(err as Error).message}`,
    )
  }
}

// The provider's sign-in page for this account, and the pending sign-in: `state` names the account
// and a secret, the nonce and the PKCE verifier stay here. The account's expired rows
// go on the way.
export const startSso = async (app: App, accountId: number, redirectUri: string) => {
  const sso = (await ssoOf(app, accountId)) ?? refuse(404, 'This account has no single sign-on.')
  const config = await discover(sso)
  const state = newSecret(accountId)
  const nonce = client.randomNonce()
  const verifier = client.randomPKCECodeVerifier()
  await app.sql`delete from sso_logins where account_id = ${accountId} and expires_at < now()`
  await app.sql`insert into sso_logins (account_id, state_hash, issuer, nonce, code_verifier,
    expires_at)
    values (${accountId}, ${state.hash}, ${sso.issuer}, ${nonce}, ${verifier},
      now() + ${PENDING}::interval)`
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid email',
    response_type: 'code',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state: state.value,
    nonce,
  })
  return { location: url.href, state: state.value, maxAge: PENDING_SECONDS }
}

// A refusal of the callback, with the code the console's sign-in page is sent (routes.ts): the
// person came from the provider's page in a browser, so the answer is a redirect, not a Problem.
const SSO_ERRORS = [
  'invalid_state',
  'sso_changed',
  'provider_unreachable',
  'provider_denied',
  'answer_refused',
  'no_email',
  'email_unverified',
  'email_domain',
  'unavailable',
] as const
type SsoError = (typeof SSO_ERRORS)[number]
export class SsoRefusal extends Refusal {
  constructor(
    readonly code: SsoError,
    status: number,
    message: string,
    errors?: FieldError[],
  ) {
    super(status, message, errors)
  }
}
const ssoRefuse = (
  code: SsoError,
  status: number,
  message: string,
  errors?: FieldError[],
): never => {
  throw new SsoRefusal(code, status, message, errors)
}

const BAD_STATE =
  'This sign-in is not valid: it was used already, it has expired, or it was not started here.'
export const badState = (message = BAD_STATE) =>
  ssoRefuse('invalid_state', 400, message, [{ path: '/state', message }])

// Spends the pending sign-in that `state` names (one use, whatever comes next), in its account.
const takePending = async (sql: Sql, state: string) => {
  const read = readSecret(state) ?? badState()
  // An expired row is left to the next start's clean-up: Citus takes now() in WHERE,
  // not in RETURNING.
  const [row] = await sql`delete from sso_logins where account_id = ${read.accountId}
      and state_hash = ${read.hash}
    and expires_at > now() returning issuer, nonce, code_verifier`
  if (!row) badState()
  return {
    accountId: read.accountId,
    issuer: row.issuer as string,
    nonce: row.nonce,
    verifier: row.code_verifier,
  }
}

// What openid-client found wrong, for the person and the logs: its message, the claim or parameter
// at fault, and the message of a deeper cause (a signature check).
const why = (err: unknown) => {
  const { message, code, cause } = err as {
    message: string
    code?: string
    cause?: Record<string, unknown>
  }
  const at = cause && (cause.claim ?? cause.parameter)
  const inner = cause instanceof Error ? cause.message : undefined
  return [message, at && `(${at})`, inner && `(${inner})`, code && `[${code}]`]
    .filter(Boolean)
    .join(' ')
}

// The email the provider vouches for, if it is verified and of one of the account's domains.
const ssoEmail = (claims: Record<string, unknown>, domains: readonly string[]) => {
  const email = typeof claims.email === 'string' ? claims.email.trim().toLowerCase() : ''
  if (!email || email.length > 255)
    return ssoRefuse('no_email', 403, 'The identity provider gave no email.')
  if (claims.email_verified !== true)
    return ssoRefuse('email_unverified', 403, `The provider has not verified ${email}.`)
  if (!domains.includes(email.slice(email.lastIndexOf('@') + 1)))
    return ssoRefuse(
      'email_domain',
      403,
      `${email} is not of a domain this account signs in with SSO.`,
    )
  return email
}

// The user of the email in the account, made with the default role the first time.
const userFor = async (sql: Sql, accountId: number, email: string, role: Role) => {
  const [made] =
    await sql`insert into users (account_id, email, role) values (${accountId}, ${email}, ${role})
    on conflict (account_id, lower(email)) do nothing returning id`
  if (made) return Number(made.id)
  const [found] =
    await sql`select id from users where account_id = ${accountId} and lower(email) = ${email}`
  return Number(found.id)
}

// The provider's answer: the pending sign-in it names is spent, the answer and its ID token are
// checked against the configuration of that account alone (a changed issuer refuses the sign-ins
// started under the old one), and the person is signed in as a password sign-in does.
export const finishSso = async (app: App, state: string, currentUrl: URL) => {
  const pending = await takePending(app.sql, state)
  const sso = await ssoOf(app, pending.accountId)
  if (!sso || sso.issuer !== pending.issuer)
    ssoRefuse(
      'sso_changed',
      400,
      'The account’s single sign-on changed during this sign-in; start again.',
    )
  const config = await discover(sso!)
  let claims: Record<string, unknown> | undefined
  try {
    const tokens = await client.authorizationCodeGrant(config, currentUrl, {
      pkceCodeVerifier: pending.verifier,
      expectedState: state,
      expectedNonce: pending.nonce,
      idTokenExpected: true,
    })
    claims = tokens.claims()
    // A provider may keep the email out of the ID token (as OpenID Connect Core 5.4 lets it when an
    // access token is issued): then its userinfo endpoint, for the token's own subject, says it.
    // Both claims come from one answer, so an email is never taken as verified by another's claim.
    if (claims && (claims.email === undefined || claims.email_verified === undefined)) {
      const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub as string)
      claims = { ...claims, email: info.email, email_verified: info.email_verified }
    }
  } catch (err) {
    // The provider's own refusal (the person declined, or is not allowed) is told apart.
    const denied = err instanceof client.AuthorizationResponseError
    ssoRefuse(
      denied ? 'provider_denied' : 'answer_refused',
      400,
      `The identity provider's answer was refused: ${why(err)}`,
    )
  }
  const email = ssoEmail(claims ?? {}, sso!.domains)
  const userId = await userFor(app.sql, pending.accountId, email, sso!.default_role)
  return openSession(app.sql, pending.accountId, userId)
}
