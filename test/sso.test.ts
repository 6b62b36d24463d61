// Single sign-on through OpenID Connect against a real provider (oidc-provider) on loopback: the
// flow signs in and creates the user, and a tampered or replayed state, a wrong nonce, a bad
// signature, another issuer, an unverified email and an email of another domain are each refused.
import { generateKeyPairSync } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import Provider from 'oidc-provider'
import { open, seal } from '../src/people/sealed.ts'
import { SECRET_KEY, startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let accountId: number
const CLIENT = { client_id: 'service', client_secret: 'a-client-secret-of-the-service' }
const PEOPLE: Record<string, { email: string; email_verified: boolean }> = {
  ada: { email: 'Ada@acme.test', email_verified: true },
  unverified: { email: 'eve@acme.test', email_verified: false },
  outsider: { email: 'mallory@other.test', email_verified: true },
}

// A signing key; both providers of one issuer use the kid `k1`, so a token of the other is a bad
// signature, not an unknown key.
const key = () => ({
  ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid: 'k1',
})

const provider = (issuer: string, jwk: ReturnType<typeof key>) =>
  new Provider(issuer, {
    clients: [
      {
        ...CLIENT,
        redirect_uris: [`${s.base}/auth/v1/sso/callback`],
        grant_types: ['authorization_code'],
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: ['provider-cookie-key'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    conformIdTokenClaims: false,
    findAccount: (_ctx, sub) =>
      PEOPLE[sub] ? { accountId: sub, claims: () => ({ sub, ...PEOPLE[sub] }) } : undefined,
  })

// A loopback server whose handler is chosen per request.
const listen = async (handle: (req: IncomingMessage, res: ServerResponse) => void) => {
  const server = createServer((req, res) => handle(req, res))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

let servers: Server[] = []
let issuer: string
let other: string
// The issuer's server answers from `active`, but its keys (/jwks) always from the real provider.
let real: Provider
let impostor: Provider
let active: Provider

before(async () => {
  s = await startTestService()
  accountId = (await s.account('Acme')).id
  const main = await listen((req, res) =>
    (req.url?.startsWith('/jwks') ? real : active).callback()(req, res),
  )
  issuer = main.url
  real = provider(issuer, key())
  impostor = provider(issuer, key())
  active = real
  const third = await listen((req, res) => elsewhere.callback()(req, res))
  other = third.url
  const elsewhere = provider(other, key())
  servers = [main.server, third.server]
  const set = await s.admin('PUT', `/accounts/${accountId}/sso`, {
    issuer,
    ...CLIENT,
    domains: ['ACME.test'],
    default_role: 'manager',
  })
  assert.equal(set.status, 200, JSON.stringify(set.body))
  assert.deepEqual(set.body, {
    issuer,
    client_id: CLIENT.client_id,
    domains: ['acme.test'],
    default_role: 'manager',
  })
})

after(async () => {
  for (const server of servers) server.closeAllConnections()
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  await s?.stop()
})

// The service's start: its redirect to the provider and the cookie that binds the browser.
const start = async () => {
  const res = await fetch(`${s.base}/auth/v1/sso/${accountId}/start`, { redirect: 'manual' })
  assert.equal(res.status, 302, await res.text())
  const cookie = /service_sso_state=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')![1]
  return { location: res.headers.get('location')!, cookie }
}

// A browser at the provider: it follows redirects with its cookies, signs in as `sub` on the login
// form of devInteractions, consents, and stops at the redirect back to the service.
const authorize = async (url: string, sub: string) => {
  const jar = new Map<string, string>()
  let next = url
  let init: RequestInit = {}
  for (let step = 0; step < 20; step++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
    const res = await fetch(next, {
      ...init,
      redirect: 'manual',
      headers: { ...init.headers, cookie },
    })
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';')
      jar.set(pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1))
    }
    const location = res.headers.get('location')
    if (location) {
      next = new URL(location, next).href
      if (next.startsWith(s.base)) return new URL(next)
      init = {}
      continue
    }
    const html = await res.text()
    assert.equal(res.status, 200, html)
    const action = /action="([^"]+)"/.exec(html)![1]
    const form: Record<string, string> = html.includes('name="login"')
      ? { prompt: 'login', login: sub, password: 'any' }
      : { prompt: 'consent' }
    next = new URL(action, next).href
    init = {
      method: 'POST',
      body: new URLSearchParams(form).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    }
  }
  throw new Error('the provider never sent the browser back')
}

// The callback always redirects: to the console, signed in, or to its sign-in page with the
// refusal's code and sentence in the fragment (`error` and `detail` here).
const callback = (url: URL, cookie: string) =>
  fetch(url, { redirect: 'manual', headers: { cookie: `service_sso_state=${cookie}` } }).then(
    (res) => {
      assert.equal(res.status, 302)
      const location = new URL(res.headers.get('location')!)
      const hash = new URLSearchParams(location.hash.slice(1))
      return {
        headers: res.headers,
        location: `${location.origin}${location.pathname}`,
        error: hash.get('sso_error'),
        detail: hash.get('sso_detail') ?? '',
      }
    },
  )
const refused = async (url: URL, cookie: string, code: string) => {
  const res = await callback(url, cookie)
  assert.equal(res.error, code, res.detail)
  assert.equal(res.location, `${s.base}/console`)
  assert.equal(res.headers.get('set-cookie'), null, 'no session')
  return res
}

test('signs in a verified email of the domains, creating the user with the default role', async () => {
  const { location, cookie } = await start()
  const auth = new URL(location)
  assert.equal(auth.origin, issuer)
  assert.equal(auth.searchParams.get('code_challenge_method'), 'S256')
  assert.ok(auth.searchParams.get('nonce') && auth.searchParams.get('code_challenge'))
  assert.equal(auth.searchParams.get('redirect_uri'), `${s.base}/auth/v1/sso/callback`)
  const back = await authorize(location, 'ada')
  const res = await callback(back, cookie)
  assert.equal(res.error, null, res.detail)
  assert.equal(res.headers.get('location'), `${s.base}/console`)
  const setCookie = res.headers.get('set-cookie') ?? ''
  assert.match(setCookie, /service_session=[^;]+; HttpOnly; SameSite=Lax; Path=\//)
  const session = /service_session=([^;]*)/.exec(setCookie)![1]
  const me = await fetch(`${s.base}/auth/v1/me`, {
    headers: { cookie: `service_session=${session}` },
  })
  assert.equal(me.status, 200)
  const who = await me.json()
  assert.equal(who.user.email, 'ada@acme.test')
  assert.equal(who.user.role, 'manager')
  assert.equal(who.account.id, accountId)

  // The same state again: spent. The same person once more: the same user, a new session id.
  await refused(back, cookie, 'invalid_state')
  const again = await start()
  const second = await callback(await authorize(again.location, 'ada'), again.cookie)
  assert.equal(second.error, null, second.detail)
  assert.notEqual(
    /service_session=([^;]*)/.exec(second.headers.get('set-cookie') ?? '')![1],
    session,
  )
  const users = await s.sql`select id from users where account_id = ${accountId}
      and lower(email) = 'ada@acme.test'`
  assert.equal(users.length, 1)
})

test('a tampered state, a state of another browser, and no state are refused', async () => {
  const { location, cookie } = await start()
  const back = await authorize(location, 'ada')
  const tampered = new URL(back)
  const state = tampered.searchParams.get('state')!
  tampered.searchParams.set('state', `${state.slice(0, -2)}${state.endsWith('AA') ? 'BB' : 'AA'}`)
  await refused(tampered, tampered.searchParams.get('state')!, 'invalid_state')
  assert.match(
    (await refused(back, 'someone-else', 'invalid_state')).detail,
    /not started in this browser/,
  )
  const none = new URL(back)
  none.searchParams.delete('state')
  await refused(none, cookie, 'invalid_state')
  // The untampered answer still works once: the refusals spent nothing of it.
  assert.equal((await callback(back, cookie)).error, null)
})

test('an ID token for another nonce is refused', async () => {
  const { location, cookie } = await start()
  const back = await authorize(location, 'ada')
  await s.sql`update sso_logins set nonce = 'another-nonce' where account_id = ${accountId}`
  assert.match((await refused(back, cookie, 'answer_refused')).detail, /nonce/)
})

test('an ID token signed with another key under the same issuer is refused', async () => {
  active = impostor
  try {
    const { location, cookie } = await start()
    assert.match(
      (await refused(await authorize(location, 'ada'), cookie, 'answer_refused')).detail,
      /signature/i,
    )
  } finally {
    active = real
  }
})

test('an answer of another issuer is refused', async () => {
  const { location, cookie } = await start()
  const elsewhere = new URL(location)
  const at = new URL(other)
  elsewhere.host = at.host
  const back = await authorize(elsewhere.href, 'ada')
  assert.equal(back.searchParams.get('iss'), other)
  assert.match((await refused(back, cookie, 'answer_refused')).detail, /iss/)
})

test('an unverified email and an email outside the domains are refused, and no user is made', async () => {
  for (const [sub, code] of [
    ['unverified', 'email_unverified'],
    ['outsider', 'email_domain'],
  ]) {
    const { location, cookie } = await start()
    await refused(await authorize(location, sub), cookie, code)
  }
  const made = await s.sql`select email from users where account_id = ${accountId}
      and email in ('eve@acme.test',
    'mallory@other.test')`
  assert.equal(made.length, 0)
})

test('the configuration is validated; an account without SSO has no start', async () => {
  for (const [field, value] of [
    ['issuer', 'http://example.com'],
    ['issuer', 'https://idp.example.com/?x=1'],
    ['domains', []],
    ['domains', ['not a domain']],
    ['default_role', 'owner'],
  ] as const) {
    const body = {
      issuer,
      ...CLIENT,
      domains: ['acme.test'],
      default_role: 'viewer',
      [field]: value,
    }
    const res = await s.admin('PUT', `/accounts/${accountId}/sso`, body)
    assert.equal(res.status, 400, `${field}: ${JSON.stringify(res.body)}`)
    assert.match(res.body.errors[0].path, new RegExp(`^/${field}`))
  }
  const bare = (await s.account('Bare')).id
  assert.equal(
    (await fetch(`${s.base}/auth/v1/sso/${bare}/start`, { redirect: 'manual' })).status,
    404,
  )
  assert.equal((await fetch(`${s.base}/auth/v1/sso/x/start`, { redirect: 'manual' })).status, 404)
})

test('a sign-in older than its 10 minutes is refused', async () => {
  const { location, cookie } = await start()
  const [row] =
    await s.sql`select extract(epoch from expires_at - now())::int as left from sso_logins
      where account_id = ${accountId}
    and expires_at > now() order by expires_at desc limit 1`
  assert.ok(row.left > 590 && row.left <= 600, String(row.left))
  const back = await authorize(location, 'ada')
  await s.sql`update sso_logins set expires_at = now() - interval '1 second'
    where account_id = ${accountId}`
  await refused(back, cookie, 'invalid_state')
})

// An admin of an account, signed in, as the console sends their requests.
const adminOf = async (service: TestService, account: number, email: string) => {
  const invite = await service.admin('POST', `/accounts/${account}/users`, { email, role: 'admin' })
  const password = 'a password of the admin'
  const post = (path: string, body: unknown) =>
    fetch(service.base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  assert.equal(
    (await post('/auth/v1/password', { token: invite.body.invite_token, password })).status,
    200,
  )
  const signed = await post('/auth/v1/sign-in', { email, password })
  const cookie = /service_session=([^;]*)/.exec(signed.headers.get('set-cookie') ?? '')![1]
  const { csrf_token } = await signed.json()
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(service.base + path, {
      method,
      headers: {
        cookie: `service_session=${cookie}`,
        'x-csrf-token': csrf_token,
        origin: service.base,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined }
  }
}

test('an admin of the account sets, reads and removes its SSO; its issuer passes the rule of webhooks', async () => {
  const own = (await s.account('Own')).id
  const admin = await adminOf(s, own, 'admin@own.test')
  assert.equal((await admin('GET', '/api/v1/sso')).status, 404)
  const body = { issuer, ...CLIENT, domains: ['own.test'], default_role: 'viewer' }
  // Loopback passes here as a webhook's receiver does in the tests: SERVICE_WEBHOOK_ALLOW_PRIVATE.
  const set = await admin('PUT', '/api/v1/sso', body)
  assert.equal(set.status, 200, JSON.stringify(set.body))
  assert.deepEqual((await admin('GET', '/api/v1/sso')).body, {
    issuer,
    client_id: CLIENT.client_id,
    domains: ['own.test'],
    default_role: 'viewer',
  })
  const [entry] = (await admin('GET', '/api/v1/audit?limit=1')).body.entries
  assert.deepEqual(
    [entry.action, entry.target, entry.actor.name],
    ['setAccountSso', 'sso', 'admin@own.test'],
  )
  assert.equal(
    (await fetch(`${s.base}/auth/v1/sso/${own}/start`, { redirect: 'manual' })).status,
    302,
  )
  assert.equal((await admin('DELETE', '/api/v1/sso')).status, 204)
  assert.equal((await admin('DELETE', '/api/v1/sso')).status, 404)
  assert.equal(
    (await fetch(`${s.base}/auth/v1/sso/${own}/start`, { redirect: 'manual' })).status,
    404,
  )

  // Without that allowance, an account's admin names no private, loopback or link-local issuer,
  // by its address or by its name; the operator still may.
  const strict = await startTestService(
    { webhookAllowPrivate: false },
    { http: true, worker: false },
  )
  try {
    const acct = (await strict.account('Strict')).id
    const theirs = await adminOf(strict, acct, 'admin@strict.test')
    for (const bad of [
      issuer,
      'https://10.1.2.3',
      'https://169.254.169.254/',
      'https://[::1]:8443',
      'https://[::ffff:192.168.0.1]',
      'https://localhost',
    ]) {
      const res = await theirs('PUT', '/api/v1/sso', { ...body, issuer: bad })
      assert.equal(res.status, 400, `${bad}: ${JSON.stringify(res.body)}`)
      assert.deepEqual(
        res.body.errors.map((e: { path: string }) => e.path),
        ['/issuer'],
        bad,
      )
    }
    assert.equal((await theirs('GET', '/api/v1/sso')).status, 404)
    assert.equal(
      (await strict.admin('PUT', `/accounts/${acct}/sso`, { ...body, issuer })).status,
      200,
    )
  } finally {
    await strict.stop()
  }
})

test('the client secret is kept sealed: not in the database, and bound to its account', async () => {
  const [row] = await s.sql`select client_secret from sso_configs where account_id = ${accountId}`
  assert.match(row.client_secret, /^v1\.[\w-]{8}\.[\w-]+\.[\w-]+\.[\w-]+$/)
  assert.ok(!row.client_secret.includes(CLIENT.client_secret))
  // Another account's row given this sealed secret: it does not open there.
  const copy = (await s.account('Copy')).id
  const body = { issuer, ...CLIENT, domains: ['copy.test'], default_role: 'viewer' }
  assert.equal((await s.admin('PUT', `/accounts/${copy}/sso`, body)).status, 200)
  await s.sql`update sso_configs set client_secret = ${row.client_secret}
    where account_id = ${copy}`
  const res = await fetch(`${s.base}/auth/v1/sso/${copy}/start`, { redirect: 'manual' })
  assert.equal(res.status, 503)
  assert.match((await res.json()).detail, /cannot be opened/)
  // Sealed under another key, or damaged: not opened either; without a key, nothing is sealed.
  assert.throws(
    () => open('another-secret-key-of-32-characters', row.client_secret, String(accountId)),
    /opened/,
  )
  const damaged = `${row.client_secret.slice(0, -2)}${row.client_secret.endsWith('AA') ? 'BB' : 'AA'}`
  assert.throws(() => open(SECRET_KEY, damaged, String(accountId)), /opened/)
  assert.equal(open(SECRET_KEY, row.client_secret, String(accountId)), CLIENT.client_secret)
  assert.throws(() => seal(undefined, 'x', '1'), /SERVICE_SECRET_KEY/)
})

test('an ID token without the email: the userinfo endpoint gives it, for the same subject', async () => {
  // A provider that conforms to OpenID Connect Core 5.4: the claims the `email` scope asks for
  // come from its userinfo endpoint (/me) alone when an access token is issued.
  let userinfo = 0
  const conforming = await listen((req, res) => {
    if (req.url?.startsWith('/me')) userinfo++
    strictProvider.callback()(req, res)
  })
  servers.push(conforming.server)
  const strictProvider = new Provider(conforming.url, {
    clients: [
      {
        ...CLIENT,
        redirect_uris: [`${s.base}/auth/v1/sso/callback`],
        grant_types: ['authorization_code'],
      },
    ],
    jwks: { keys: [key()] },
    cookies: { keys: ['provider-cookie-key'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    findAccount: (_ctx, sub) =>
      PEOPLE[sub] ? { accountId: sub, claims: () => ({ sub, ...PEOPLE[sub] }) } : undefined,
  })
  const acct = (await s.account('Userinfo')).id
  const body = { issuer: conforming.url, ...CLIENT, domains: ['acme.test'], default_role: 'viewer' }
  assert.equal((await s.admin('PUT', `/accounts/${acct}/sso`, body)).status, 200)
  const startAt = async () => {
    const res = await fetch(`${s.base}/auth/v1/sso/${acct}/start`, { redirect: 'manual' })
    const cookie = /service_sso_state=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')![1]
    return { location: res.headers.get('location')!, cookie }
  }
  const first = await startAt()
  const back = await authorize(first.location, 'ada')
  const res = await callback(back, first.cookie)
  assert.equal(res.error, null, res.detail)
  // The service asks userinfo only when the ID token lacks the email or its verification.
  assert.equal(userinfo, 1)
  const [user] = await s.sql`select email, role from users where account_id = ${acct}`
  assert.deepEqual({ ...user }, { email: 'ada@acme.test', role: 'viewer' })
  // The userinfo's claims decide as an ID token's would: an unverified email is refused.
  const second = await startAt()
  await refused(await authorize(second.location, 'unverified'), second.cookie, 'email_unverified')
  assert.equal(userinfo, 2)
})
