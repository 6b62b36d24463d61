import * as v from 'valibot'
import { ACCOUNTS, accountIn, KeyAccount } from '../accounts/accounts.ts'
import type { App } from '../context.ts'
import { Refusal, refuse } from '../errors.ts'
import { idParam, noContent, ok, type Reply, type Req, type Route, route } from '../route.ts'
import { strict } from '../validate.ts'
import { MAX_PASSWORD } from './passwords.ts'
import { closeSession, cookieValue, fromOwnOrigin, setCookie } from './sessions.ts'
import {
  accountIssuerRefusal,
  badState,
  finishSso,
  getSso,
  removeSso,
  SSO_CALLBACK,
  SSO_COOKIE,
  SsoBody,
  SsoConfig,
  SsoRefusal,
  setSso,
  startSso,
} from './sso.ts'
import { signIn, whoIs } from './sign-in.ts'
import {
  Invite,
  inviteUser,
  listUsers,
  PasswordBody,
  removeUser,
  ResetLink,
  RoleBody,
  resetLink,
  setPassword,
  setRole,
  User,
  UserBody,
} from './users.ts'

// Where invite and reset links point: the address people open, or the one this request came to.
const baseUrl = (req: Req, app: App) =>
  app.config.publicUrl ?? `http://${req.headers.host ?? `localhost:${app.config.port}`}`

// The redirect URI registered with the provider.
const ssoRedirect = (req: Req, app: App) => `${baseUrl(req, app)}${SSO_CALLBACK}`

const SignInBody = strict({
  email: v.pipe(v.string(), v.maxLength(255)),
  password: v.pipe(v.string(), v.maxLength(MAX_PASSWORD)),
})
const SignedIn = v.object({
  user: User,
  account: KeyAccount,
  csrf_token: v.pipe(
    v.string(),
    v.description(
      'Send it as the x-csrf-token header with every request of the session that changes anything.',
    ),
  ),
  grants: v.pipe(
    v.array(v.string()),
    v.description(
      "What the role holds, as the routes need it: key scopes, and `manage` for the account's users, keys and " +
        'settings. The console hides what these do not cover; the API decides.',
    ),
  ),
})

// The rows the catalog had, in their places of the routing table (api/routes.ts).
export const userRoutes: Route[] = [
  route({
    method: 'POST',
    path: `${ACCOUNTS}/:id/users`,
    auth: 'admin',
    name: 'add-user',
    summary: 'Invite a user: the answer holds the one-time link that sets the password',
    body: UserBody,
    refusals: [409],
    reply: { status: 201, body: Invite },
    handler: async (req, app) =>
      ok(await inviteUser(app.sql, await accountIn(req, app), req.input, baseUrl(req, app)), 201),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNTS}/:id/users`,
    auth: 'admin',
    name: 'list-users',
    summary: 'List users',
    reply: { status: 200, body: v.array(User) },
    handler: async (req, app) => ok(await listUsers(app.sql, await accountIn(req, app))),
  }),
  route({
    method: 'GET',
    path: '/api/v1/users',
    auth: { key: 'search' },
    tag: 'search',
    name: 'account-users',
    summary: "The account's users (the customers' owners), with their names and roles",
    reply: { status: 200, body: v.array(User) },
    handler: async (req, app) => ok(await listUsers(app.sql, req.auth.accountId)),
  }),
]

export const peopleRoutes: Route[] = [
  route({
    method: 'POST',
    path: `${ACCOUNTS}/:id/users/:user_id/reset`,
    auth: 'admin',
    name: 'reset-user',
    summary: "Make a one-time link that sets a user's password (valid 1 day)",
    reply: { status: 201, body: ResetLink },
    handler: async (req, app) =>
      ok(
        await resetLink(
          app.sql,
          await accountIn(req, app),
          idParam(req, 'user_id'),
          baseUrl(req, app),
        ),
        201,
      ),
  }),
  route({
    method: 'PATCH',
    path: `${ACCOUNTS}/:id/users/:user_id`,
    auth: 'admin',
    name: 'set-user-role',
    summary:
      "Change a user's role: their sessions have it at once; the account's last admin stays admin",
    body: RoleBody,
    refusals: [409],
    reply: { status: 200, body: User },
    handler: async (req, app) =>
      ok(
        await setRole(app.sql, await accountIn(req, app), idParam(req, 'user_id'), req.input.role),
      ),
  }),
  route({
    method: 'DELETE',
    path: `${ACCOUNTS}/:id/users/:user_id`,
    auth: 'admin',
    name: 'remove-user',
    summary:
      'Remove a user: their sessions end at once, their name leaves the audit log; not the last admin',
    refusals: [409],
    reply: { status: 204 },
    handler: async (req, app) => {
      await removeUser(app.sql, await accountIn(req, app), idParam(req, 'user_id'))
      return noContent
    },
  }),
  route({
    method: 'POST',
    path: '/api/v1/users',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'invite-account-user',
    summary: 'Invite a user (an admin of the account): the answer holds the one-time link',
    body: UserBody,
    refusals: [409],
    reply: { status: 201, body: Invite },
    handler: async (req, app) =>
      ok(await inviteUser(app.sql, req.auth.accountId, req.input, baseUrl(req, app)), 201),
  }),
  route({
    method: 'POST',
    path: '/api/v1/users/:user_id/reset',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'reset-account-user',
    summary: "Make a one-time link that sets a user's password (an admin of the account)",
    reply: { status: 201, body: ResetLink },
    handler: async (req, app) =>
      ok(
        await resetLink(app.sql, req.auth.accountId, idParam(req, 'user_id'), baseUrl(req, app)),
        201,
      ),
  }),
  route({
    method: 'PATCH',
    path: '/api/v1/users/:user_id',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'set-account-user-role',
    summary:
      "Change a user's role (an admin of the account): at once; the account's last admin stays admin",
    body: RoleBody,
    refusals: [409],
    reply: { status: 200, body: User },
    handler: async (req, app) =>
      ok(await setRole(app.sql, req.auth.accountId, idParam(req, 'user_id'), req.input.role)),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/users/:user_id',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'remove-account-user',
    summary:
      'Remove a user (an admin of the account): their sessions end at once; not the last admin',
    refusals: [409],
    reply: { status: 204 },
    handler: async (req, app) => {
      const userId = idParam(req, 'user_id')
      await removeUser(app.sql, req.auth.accountId, userId)
      // The entry of one's own removal, written after, names no one either.
      if (req.session?.userId === userId && req.actor) req.actor.name = null
      return noContent
    },
  }),
  route({
    method: 'POST',
    path: '/auth/v1/sign-in',
    auth: 'none',
    tag: 'people',
    name: 'sign-in',
    summary: 'Sign in with email and password: sets the session cookie',
    body: SignInBody,
    refusals: [401, 403, 429],
    reply: { status: 200, body: SignedIn },
    handler: async (req, app) => {
      // A form of another site cannot sign its visitor in as the attacker (login CSRF).
      const origin = req.headers.origin
      if (origin && !fromOwnOrigin(origin, req.headers.host, app.config.publicUrl))
        refuse(403, 'Sign in from the service’s own pages.')
      const { cookie, ...signedIn } = await signIn(app, req.input.email, req.input.password)
      return {
        status: 200,
        body: signedIn,
        headers: { 'set-cookie': setCookie(cookie, app.config.publicUrl) },
      }
    },
  }),
  route({
    method: 'POST',
    path: '/auth/v1/sign-out',
    auth: 'session',
    tag: 'people',
    name: 'sign-out',
    summary: 'End this session, on every process at once',
    reply: { status: 204 },
    handler: async (req, app) => {
      await closeSession(app.sql, req.session)
      return { status: 204, headers: { 'set-cookie': setCookie('', app.config.publicUrl, 0) } }
    },
  }),
  route({
    method: 'GET',
    path: '/auth/v1/me',
    auth: 'session',
    tag: 'people',
    name: 'me',
    summary: 'Who is signed in: the user, the account and the CSRF token',
    reply: { status: 200, body: SignedIn },
    handler: async (req, app) =>
      ok(await whoIs(app, req.session.accountId, req.session.userId, req.session.csrfToken)),
  }),
  route({
    method: 'PUT',
    path: `${ACCOUNTS}/:id/sso`,
    auth: 'admin',
    name: 'set-sso',
    summary:
      "Set the account's single sign-on (OpenID Connect): its provider and the email domains it signs in",
    body: SsoBody,
    reply: { status: 200, body: SsoConfig },
    refusals: [503],
    handler: async (req, app) => ok(await setSso(app, await accountIn(req, app), req.input)),
  }),
  route({
    method: 'GET',
    path: '/api/v1/sso',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'get-account-sso',
    summary: "The account's single sign-on (an admin of the account), without its client secret",
    refusals: [404],
    reply: { status: 200, body: SsoConfig },
    handler: async (req, app) => ok(await getSso(app.sql, req.auth.accountId)),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/sso',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'set-account-sso',
    summary:
      "Set the account's single sign-on (an admin of the account): the issuer must be a public address, as a " +
      "webhook's URL",
    body: SsoBody,
    refusals: [503],
    reply: { status: 200, body: SsoConfig },
    handler: async (req, app) => {
      await accountIssuerRefusal(req.input.issuer, app.config.webhookAllowPrivate)
      return ok(await setSso(app, req.auth.accountId, req.input))
    },
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/sso',
    auth: { key: 'manage' },
    tag: 'people',
    name: 'remove-account-sso',
    summary:
      "Turn the account's single sign-on off (an admin of the account); its users keep their sessions",
    refusals: [404],
    reply: { status: 204 },
    handler: async (req, app) => {
      await removeSso(app.sql, req.auth.accountId)
      return noContent
    },
  }),
  route({
    method: 'GET',
    path: '/auth/v1/sso/:account_id/start',
    auth: 'none',
    tag: 'people',
    name: 'sso-start',
    summary:
      "Sign in with the account's identity provider: redirects there (authorization code with PKCE)",
    refusals: [404, 502],
    reply: { status: 302 },
    handler: async (req, app) => {
      const { location, state, maxAge } = await startSso(
        app,
        idParam(req, 'account_id'),
        ssoRedirect(req, app),
      )
      return {
        status: 302,
        headers: {
          location,
          'set-cookie': setCookie(state, app.config.publicUrl, maxAge, SSO_COOKIE),
        },
      }
    },
  }),
  route({
    method: 'GET',
    path: SSO_CALLBACK,
    auth: 'none',
    tag: 'people',
    name: 'sso-callback',
    summary:
      'Where the identity provider sends the person back: signs them in and redirects to the console, or to its ' +
      'sign-in page with #sso_error=<code>&sso_detail=<sentence> when the sign-in is refused',
    reply: { status: 302 },
    handler: async (req, app): Promise<Reply> => {
      const consoleUrl = `${baseUrl(req, app)}/console`
      try {
        const state = typeof req.query.state === 'string' ? req.query.state : ''
        // The browser that comes back is the one that started (login CSRF: a victim sent to the
        // callback with the attacker's code would be signed in as the attacker).
        if (!state || cookieValue(req.headers.cookie, SSO_COOKIE) !== state)
          badState('This sign-in was not started in this browser.')
        const current = new URL(ssoRedirect(req, app))
        current.search = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : ''
        const cookie = await finishSso(app, state, current)
        return {
          status: 302,
          headers: { location: consoleUrl, 'set-cookie': setCookie(cookie, app.config.publicUrl) },
        }
      } catch (err) {
        // The person is in a browser, back from the provider's page: the console's sign-in page
        // shows the refusal (a fragment, so no server or proxy log holds the sentence).
        if (!(err instanceof Refusal)) throw err
        const code = err instanceof SsoRefusal ? err.code : 'unavailable'
        app.log('warn', 'sso refused', { code, detail: err.message })
        const hash = new URLSearchParams({ sso_error: code, sso_detail: err.message })
        return { status: 302, headers: { location: `${consoleUrl}#${hash}` } }
      }
    },
  }),
  route({
    method: 'POST',
    path: '/auth/v1/password',
    auth: 'none',
    tag: 'people',
    name: 'set-password',
    summary: 'Set a password with an invite or reset token (once); ends every session of the user',
    body: PasswordBody,
    reply: { status: 200, body: User },
    handler: async (req, app) => ok(await setPassword(app.sql, req.input)),
  }),
]
