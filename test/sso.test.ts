// Single sign-on through OpenID Connect against a real provider (oidc-provider) on loopback: the
// flow signs in and creates the user, and a tampered or replayed state, a wrong nonce, a bad
// signature, another issuer, an unverified email and an email of another domain are each refused.
import { generateKeyPairSync } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import Provider from 'oidc-provider'
import { startTestService, type TestService } from './helpers/service.ts'

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
    clients: [{ ...CLIENT, redirect_uris: [`${s.base}/auth/v1/sso/callback`], grant_types: ['authorization_code'] }],
    jwks: { keys: [jwk] },
    cookies: { keys: ['provider-cookie-key'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    conformIdTokenClaims: false,
    findAccount: (_ctx, sub) => (PEOPLE[sub] ? { accountId: sub, claims: () => ({ sub, ...PEOPLE[sub] }) } : undefined),
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
  const main = await listen((req, res) => (req.url?.startsWith('/jwks') ? real : active).callback()(req, res))
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
  assert.deepEqual(set.body, { issuer, client_id: CLIENT.client_id, domains: ['acme.test'], default_role: 'manager' })
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
    const res = await fetch(next, { ...init, redirect: 'manual', headers: { ...init.headers, cookie } })
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

const callback = (url: URL, cookie: string) =>
  fetch(url, { redirect: 'manual', headers: { cookie: `service_sso_state=${cookie}` } }).then(async (res) => ({
    status: res.status,
    headers: res.headers,
    body: res.status === 302 ? undefined : await res.json(),
  }))

test('signs in a verified email of the domains, creating the user with the default role', async () => {
  const { location, cookie } = await start()
  const auth = new URL(location)
  assert.equal(auth.origin, issuer)
  assert.equal(auth.searchParams.get('code_challenge_method'), 'S256')
  assert.ok(auth.searchParams.get('nonce') && auth.searchParams.get('code_challenge'))
  assert.equal(auth.searchParams.get('redirect_uri'), `${s.base}/auth/v1/sso/callback`)
  const back = await authorize(location, 'ada')
  const res = await callback(back, cookie)
  assert.equal(res.status, 302, JSON.stringify(res.body))
  assert.equal(res.headers.get('location'), `${s.base}/console`)
  const setCookie = res.headers.get('set-cookie') ?? ''
  assert.match(setCookie, /service_session=[^;]+; HttpOnly; SameSite=Lax; Path=\//)
  const session = /service_session=([^;]*)/.exec(setCookie)![1]
  const me = await fetch(`${s.base}/auth/v1/me`, { headers: { cookie: `service_session=${session}` } })
  assert.equal(me.status, 200)
  const who = await me.json()
  assert.equal(who.user.email, 'ada@acme.test')
  assert.equal(who.user.role, 'manager')
  assert.equal(who.account.id, accountId)

  // The same state again: spent. The same person once more: the same user, a new session id.
  assert.equal((await callback(back, cookie)).status, 400)
  const again = await start()
  const second = await callback(await authorize(again.location, 'ada'), again.cookie)
  assert.equal(second.status, 302)
  assert.notEqual(/service_session=([^;]*)/.exec(second.headers.get('set-cookie') ?? '')![1], session)
  const users = await s.sql`select id from users where account_id = ${accountId} and lower(email) = 'ada@acme.test'`
  assert.equal(users.length, 1)
})

test('a tampered state, a state of another browser, and no state are refused', async () => {
  const { location, cookie } = await start()
  const back = await authorize(location, 'ada')
  const tampered = new URL(back)
  const state = tampered.searchParams.get('state')!
  tampered.searchParams.set('state', `${state.slice(0, -2)}${state.endsWith('AA') ? 'BB' : 'AA'}`)
  const refused = await callback(tampered, tampered.searchParams.get('state')!)
  assert.equal(refused.status, 400)
  assert.equal(refused.body.errors[0].path, '/state')
  assert.equal((await callback(back, 'someone-else')).status, 400)
  const none = new URL(back)
  none.searchParams.delete('state')
  assert.equal((await callback(none, cookie)).status, 400)
  // The untampered answer still works once: the refusals spent nothing of it.
  assert.equal((await callback(back, cookie)).status, 302)
})

test('an ID token for another nonce is refused', async () => {
  const { location, cookie } = await start()
  const back = await authorize(location, 'ada')
  await s.sql`update sso_logins set nonce = 'another-nonce' where account_id = ${accountId}`
  const res = await callback(back, cookie)
  assert.equal(res.status, 400)
  assert.match(res.body.detail, /nonce/)
})

test('an ID token signed with another key under the same issuer is refused', async () => {
  active = impostor
  try {
    const { location, cookie } = await start()
    const res = await callback(await authorize(location, 'ada'), cookie)
    assert.equal(res.status, 400)
    assert.match(res.body.detail, /signature/i)
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
  const res = await callback(back, cookie)
  assert.equal(res.status, 400)
  assert.match(res.body.detail, /iss/)
})

test('an unverified email and an email outside the domains are refused, and no user is made', async () => {
  for (const sub of ['unverified', 'outsider']) {
    const { location, cookie } = await start()
    const res = await callback(await authorize(location, sub), cookie)
    assert.equal(res.status, 403, JSON.stringify(res.body))
    assert.equal(res.headers.get('set-cookie'), null)
  }
  const made = await s.sql`select email from users where account_id = ${accountId} and email in ('eve@acme.test',
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
    const body = { issuer, ...CLIENT, domains: ['acme.test'], default_role: 'viewer', [field]: value }
    const res = await s.admin('PUT', `/accounts/${accountId}/sso`, body)
    assert.equal(res.status, 400, `${field}: ${JSON.stringify(res.body)}`)
    assert.match(res.body.errors[0].path, new RegExp(`^/${field}`))
  }
  const bare = (await s.account('Bare')).id
  assert.equal((await fetch(`${s.base}/auth/v1/sso/${bare}/start`, { redirect: 'manual' })).status, 404)
  assert.equal((await fetch(`${s.base}/auth/v1/sso/x/start`, { redirect: 'manual' })).status, 404)
})

test('a sign-in older than its 10 minutes is refused', async () => {
  const { location, cookie } = await start()
  const [row] = await s.sql`select extract(epoch from expires_at - now())::int as left from sso_logins
      where account_id = ${accountId}
    and expires_at > now() order by expires_at desc limit 1`
  assert.ok(row.left > 590 && row.left <= 600, String(row.left))
  const back = await authorize(location, 'ada')
  await s.sql`update sso_logins set expires_at = now() - interval '1 second' where account_id = ${accountId}`
  const res = await callback(back, cookie)
  assert.equal(res.status, 400)
  assert.equal(res.body.errors[0].path, '/state')
})
