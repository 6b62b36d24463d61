// People sign in (docs/security.md, "Sessions"): invites and resets, passwords, the lockout, the
// session cookie, CSRF, the role rule against every route of the table, and sessions across two
// `serve` processes sharing one database.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { routes } from '../src/api/routes.ts'
import { invokeAdmin } from '../src/cli/admin.ts'
import type { Refusal } from '../src/errors.ts'
import { hashPassword, verifyPassword } from '../src/people/passwords.ts'
import { setRole } from '../src/people/users.ts'
import { ROLE_GRANTS, ROLES, type Role, type Route } from '../src/route.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { startProcess } from './helpers/process.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let account: Awaited<ReturnType<TestService['account']>>
let other: Awaited<ReturnType<TestService['account']>>
const PASSWORD = 'correct horse battery'

interface Person {
  id: number
  email: string
  cookie: string
  csrf: string
}
const people = {} as Record<Role, Person>

const cookieOf = (headers: Headers) =>
  /service_session=([^;]*)/.exec(headers.get('set-cookie') ?? '')?.[1] ?? ''

const invite = async (accountId: number, email: string, role?: Role) => {
  const res = await s.admin('POST', `/accounts/${accountId}/users`, {
    email,
    ...(role && { role }),
  })
  assert.equal(res.status, 201, JSON.stringify(res.body))
  return res.body as { id: number; role: Role; invite_token: string; invite_url: string }
}
const setPassword = (token: string, password = PASSWORD, base = s.base) =>
  fetch(`${base}/auth/v1/password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, password }),
  }).then(async (r) => ({ status: r.status, body: await r.json() }))
const signIn = async (
  email: string,
  password = PASSWORD,
  base = s.base,
  headers: Record<string, string> = {},
) => {
  const res = await fetch(`${base}/auth/v1/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ email, password }),
  })
  return { status: res.status, headers: res.headers, body: await res.json() }
}
const person = async (accountId: number, email: string, role: Role): Promise<Person> => {
  const { id, invite_token } = await invite(accountId, email, role)
  assert.equal((await setPassword(invite_token)).status, 200)
  const res = await signIn(email)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return { id, email, cookie: cookieOf(res.headers), csrf: res.body.csrf_token }
}

// A request of a signed-in person, as the console sends it: the cookie, the CSRF token, its Origin.
const as =
  (p: Pick<Person, 'cookie' | 'csrf'>, base = s.base, extra: Record<string, string> = {}) =>
  async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: {
        cookie: `service_session=${p.cookie}`,
        'x-csrf-token': p.csrf,
        origin: base,
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...extra,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined }
  }

before(async () => {
  // On Citus a statement of a service-api connection that touches more than one shard fails (a
  // placeholder on a plain server): every session request must stay inside its account.
  s = await startTestService(
    { apiRateLimit: 100_000, databaseApiOptions: { 'citus.multi_task_query_log_level': 'error' } },
    { http: true, worker: false },
  )
  account = await scoredAccount(s, 'People')
  other = await s.account('Other')
  for (const role of ROLES) people[role] = await person(account.id, `${role}@people.test`, role)
})
after(() => s.stop())

test('an invite answers a one-time link; the role is viewer when not given', async () => {
  const made = await invite(account.id, 'new@people.test')
  assert.equal(made.role, 'viewer')
  assert.match(made.invite_token, new RegExp(`^${account.id}\\.[A-Za-z0-9_-]{43}$`))
  assert.equal(made.invite_url, `${s.base}/console#password=${made.invite_token}`)
  // Not signed in before the password is set, whatever is tried.
  assert.equal((await signIn('new@people.test', '')).status, 401)
  const listed = await account.api('/api/v1/users', undefined, 'GET')
  assert.deepEqual(
    listed.body.map((u: { email: string; role: string }) => [u.email, u.role]).slice(-1),
    [['new@people.test', 'viewer']],
  )
})

test('the CLI invites through the admin operation, with the same answer', async () => {
  const route = routes.find((r) => r.name === 'add-user')!
  const made = await invokeAdmin(
    route,
    { id: String(account.id) },
    '{"email":"cli@people.test","role":"manager"}',
    s.app,
  )
  assert.equal(made.ok, true)
  const body = made.body as { role: string; invite_token: string; invite_url: string }
  assert.equal(body.role, 'manager')
  assert.match(body.invite_url, /\/console#password=/)
  assert.equal((await setPassword(body.invite_token)).status, 200)
  assert.equal((await signIn('cli@people.test')).body.user.role, 'manager')
})

test('a password is 12 characters or more and not the email; a refused one leaves the link unspent', async () => {
  const { invite_token } = await invite(account.id, 'Rule.Breaker@people.test')
  const short = await setPassword(invite_token, 'elevenchars')
  assert.equal(short.status, 400)
  assert.deepEqual(
    short.body.errors.map((e: { path: string }) => e.path),
    ['/password'],
  )
  const email = await setPassword(invite_token, 'rule.breaker@people.test')
  assert.equal(email.status, 400)
  assert.deepEqual(email.body.errors, [{ path: '/password', message: 'Must not be the email.' }])
  assert.equal((await setPassword(invite_token)).status, 200)
})

test('an invite or reset token works once, and not once expired', async () => {
  const { id, invite_token } = await invite(account.id, 'once@people.test')
  assert.equal((await setPassword(invite_token)).status, 200)
  const again = await setPassword(invite_token, 'another password!')
  assert.equal(again.status, 400)
  assert.equal(again.body.errors[0].path, '/token')
  assert.equal((await signIn('once@people.test')).status, 200)

  const reset = await s.admin('POST', `/accounts/${account.id}/users/${id}/reset`)
  assert.equal(reset.status, 201)
  assert.equal(reset.body.reset_url, `${s.base}/console#password=${reset.body.reset_token}`)
  await s.sql`update user_tokens set expires_at = now() - interval '1 second'
    where account_id = ${account.id} and user_id = ${id} and used_at is null`
  assert.equal((await setPassword(reset.body.reset_token, 'a new password!')).status, 400)

  const fresh = await s.admin('POST', `/accounts/${account.id}/users/${id}/reset`)
  assert.equal((await setPassword(fresh.body.reset_token, 'a new password!')).status, 200)
  assert.equal((await setPassword(fresh.body.reset_token, 'a third password')).status, 400)
  assert.equal((await signIn('once@people.test')).status, 401)
  assert.equal((await signIn('once@people.test', 'a new password!')).status, 200)
  // A token of one account does not work with another's id in front (the lookup is per account).
  const forged = await s.admin('POST', `/accounts/${account.id}/users/${id}/reset`)
  const secret = forged.body.reset_token.split('.')[1]
  assert.equal((await setPassword(`${other.id}.${secret}`, 'forged password!')).status, 400)
  // A user of another account is not one of this account's (404, nothing made).
  assert.equal((await s.admin('POST', `/accounts/${other.id}/users/${id}/reset`)).status, 404)
})

test('sign-in answers the user, the account and the CSRF token, and sets the cookie with its flags', async () => {
  const res = await signIn('viewer@people.test')
  assert.equal(res.status, 200)
  assert.deepEqual(res.body.user, {
    id: people.viewer.id,
    email: 'viewer@people.test',
    name: null,
    role: 'viewer',
  })
  assert.deepEqual(res.body.account, { id: account.id, name: 'People' })
  assert.match(res.body.csrf_token, /^[A-Za-z0-9_-]{43}$/)
  const flags = res.headers.get('set-cookie')!.split('; ').slice(1)
  assert.deepEqual(flags.sort(), ['HttpOnly', 'Path=/', 'SameSite=Lax'])
  // A new id on every sign-in.
  const again = await signIn('viewer@people.test')
  assert.notEqual(cookieOf(again.headers), cookieOf(res.headers))
  assert.notEqual(again.body.csrf_token, res.body.csrf_token)
  const me = await as({ cookie: cookieOf(again.headers), csrf: '' })('GET', '/auth/v1/me')
  assert.equal(me.status, 200)
  assert.deepEqual(me.body, again.body)
})

test('the cookie is Secure when SERVICE_PUBLIC_URL is https, and only that origin may change things', async () => {
  const secure = await startTestService(
    { publicUrl: 'https://people.example' },
    { http: true, worker: false },
  )
  try {
    const made = await scoredAccount(secure, 'Secure')
    const res = await secure.admin('POST', `/accounts/${made.id}/users`, {
      email: 's@people.test',
      role: 'manager',
    })
    assert.equal(
      res.body.invite_url,
      `https://people.example/console#password=${res.body.invite_token}`,
    )
    assert.equal((await setPassword(res.body.invite_token, PASSWORD, secure.base)).status, 200)
    const signedIn = await signIn('s@people.test', PASSWORD, secure.base)
    assert.ok(signedIn.headers.get('set-cookie')!.split('; ').includes('Secure'))
    const p = { cookie: cookieOf(signedIn.headers), csrf: signedIn.body.csrf_token }
    const write = { external_id: 'c1', name: 'One' }
    // The address the request came to is not the public one: refused; the public origin passes.
    assert.equal((await as(p, secure.base)('POST', '/api/v1/customer', write)).status, 403)
    const own = await as(p, secure.base, { origin: 'https://people.example' })(
      'POST',
      '/api/v1/customer',
      write,
    )
    assert.equal(own.status, 201, JSON.stringify(own.body))
    assert.equal(
      (await signIn('s@people.test', PASSWORD, secure.base, { origin: secure.base })).status,
      403,
    )
  } finally {
    await secure.stop()
  }
})

test('a wrong password and an unknown email are one 401 with one message', async () => {
  const wrong = await signIn('viewer@people.test', 'not the password')
  const unknown = await signIn('nobody@people.test', 'not the password')
  assert.equal(wrong.status, 401)
  assert.equal(unknown.status, 401)
  assert.equal(wrong.body.detail, unknown.body.detail)
  assert.equal((await signIn('VIEWER@people.test')).status, 200, 'emails compare without case')
  assert.equal((await as({ cookie: '', csrf: '' })('GET', '/auth/v1/me')).status, 401)
  assert.equal((await s.call('GET', '/auth/v1/me')).status, 401)
})

test('10 failures for one email in 15 minutes: 429 with Retry-After, whatever the password', async () => {
  const { invite_token } = await invite(account.id, 'locked@people.test')
  await setPassword(invite_token)
  for (let i = 0; i < 10; i++)
    assert.equal((await signIn('locked@people.test', `wrong ${i}`)).status, 401)
  const locked = await signIn('locked@people.test')
  assert.equal(locked.status, 429)
  const retry = Number(locked.headers.get('retry-after'))
  assert.ok(retry > 800 && retry <= 900, `Retry-After ${retry}`)
  // An unknown email is locked the same way, so the lockout does not tell emails apart.
  for (let i = 0; i < 10; i++) await signIn('ghost@people.test', 'wrong password')
  assert.equal((await signIn('ghost@people.test', 'wrong password')).status, 429)
  // Other emails are not; and once the failures leave the window the right password signs in.
  assert.equal((await signIn('viewer@people.test')).status, 200)
  await s.sql`update sign_in_failures set at = at - interval '15 minutes 1 second'
    where email = 'locked@people.test'`
  assert.equal((await signIn('locked@people.test')).status, 200)
})

test('a sign-in takes as long for an unknown email as for a known one (measured)', async () => {
  const time = async (email: string) => {
    const start = performance.now()
    assert.equal((await signIn(email, 'wrong password!')).status, 401)
    return performance.now() - start
  }
  // What a skipped verification would save: one scrypt of the same cost, timed here.
  const stored = await hashPassword('a password of the test')
  const verification = async () => {
    const start = performance.now()
    await verifyPassword('wrong password!', stored)
    return performance.now() - start
  }
  const [known, unknown, scrypt, gaps]: number[][] = [[], [], [], []]
  await time('nobody-warm@people.test')
  // Interleaved, so that the machine's load falls on all alike, and compared pair by pair, so that
  // a minute's load moves both sides of a pair; 9 failures stay under the lockout.
  for (let i = 0; i < 9; i++) {
    known.push(await time('manager@people.test'))
    unknown.push(await time(`nobody-${i}@people.test`))
    scrypt.push(await verification())
    gaps.push(known[i] - unknown[i])
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
  const [k, u, v, gap] = [median(known), median(unknown), median(scrypt), median(gaps)]
  const ms = (x: number) => `${x.toFixed(1)} ms`
  const said = `known ${ms(k)}, unknown ${ms(u)} (${ms(gap)} less), one scrypt ${ms(v)}`
  // An unknown email is not answered a verification sooner (a skipped one: a gap of one scrypt),
  // nor much later (the upper bound wide: a loaded machine moves medians of 9 by a third).
  // The scrypt here runs beside the test's own work, so it is no bound on the request's time.
  assert.ok(v > 5 && k > 15, said)
  assert.ok(gap < 0.5 * v && u < 2 * k, said)
  await s.sql`delete from sign_in_failures where email = 'manager@people.test'`
})

// A path of the table with every parameter filled by something that names nothing.
const fill = (path: string) =>
  path.replace(/:(\w+)/g, (_, name) => (name.endsWith('id') ? '999999' : 'nobody'))

const bodyOf = (route: Route) => (route.body ? {} : undefined)

test('every role against every route of the table: allowed as its grants say, else 403', async () => {
  // The roles as SPEC section 13 defines them, in the scopes' terms.
  assert.deepEqual(ROLE_GRANTS, {
    viewer: ['search'],
    manager: ['search', 'upload'],
    admin: ['search', 'upload', 'manage', 'audit'],
  })
  let checked = 0
  for (const route of routes) {
    if (typeof route.auth !== 'object' || route.auth.credential) continue
    const need = route.auth.key
    for (const role of ROLES) {
      const res = await as(people[role])(route.method, fill(route.path), bodyOf(route))
      const label = `${role} ${route.method} ${route.path}: ${res.status} ${JSON.stringify(res.body)}`
      if (ROLE_GRANTS[role].includes(need)) assert.ok(![401, 403].includes(res.status), label)
      else assert.equal(res.status, 403, label)
      checked++
    }
  }
  assert.ok(checked > 100, `${checked} cases`)
  // Segment's routes take their key as Segment sends it, and a session does not pass for one.
  for (const route of routes.filter((r) => typeof r.auth === 'object' && r.auth.credential))
    assert.equal(
      (await as(people.admin)(route.method, fill(route.path), bodyOf(route))).status,
      401,
      route.path,
    )
  // The operator's routes stay the admin token's: an admin's session is not it.
  for (const route of routes.filter((r) => r.auth === 'admin')) {
    const res = await as(people.admin)(
      route.method,
      fill(route.path).replace('999999', String(account.id)),
      bodyOf(route),
    )
    assert.equal(res.status, 401, `${route.method} ${route.path}`)
  }
  // The account's own management is a person's: no key holds `manage`.
  assert.equal((await account.api('/api/v1/users', { email: 'k@people.test' })).status, 403)
})

test('an admin of the account invites, makes reset links and removes users, in this account only', async () => {
  const admin = as(people.admin)
  const made = await admin('POST', '/api/v1/users', {
    email: 'by-admin@people.test',
    role: 'manager',
  })
  assert.equal(made.status, 201, JSON.stringify(made.body))
  assert.equal(made.body.role, 'manager')
  assert.equal((await setPassword(made.body.invite_token)).status, 200)
  const reset = await admin('POST', `/api/v1/users/${made.body.id}/reset`)
  assert.equal(reset.status, 201)
  assert.equal(
    (await admin('POST', '/api/v1/users', { email: 'by-admin@people.test' })).status,
    409,
  )
  const foreign = await invite(other.id, 'foreign@other.test')
  assert.equal((await admin('DELETE', `/api/v1/users/${foreign.id}`)).status, 404)
  assert.equal((await admin('POST', `/api/v1/users/${foreign.id}/reset`)).status, 404)
  const theirs = await s.admin('GET', `/accounts/${other.id}/users`)
  assert.deepEqual(
    theirs.body.map((u: { id: number }) => u.id),
    [foreign.id],
  )
  const mine = await as(people.viewer)('GET', '/api/v1/users')
  assert.ok(mine.body.some((u: { email: string }) => u.email === 'by-admin@people.test'))
  assert.ok(!mine.body.some((u: { email: string }) => u.email === 'foreign@other.test'))
})

test('CSRF: a change without the header, with a wrong one, or from another Origin is 403', async () => {
  const p = people.admin
  const send = (headers: Record<string, string>) =>
    fetch(`${s.base}/api/v1/users`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        cookie: `service_session=${p.cookie}`,
        ...headers,
      },
      body: JSON.stringify({ email: 'csrf@people.test' }),
    })
  const own = { origin: s.base }
  assert.equal((await send(own)).status, 403, 'no header')
  assert.equal(
    (await send({ ...own, 'x-csrf-token': people.manager.csrf })).status,
    403,
    "another session's",
  )
  assert.equal((await send({ ...own, 'x-csrf-token': 'x'.repeat(43) })).status, 403, 'wrong')
  assert.equal(
    (await send({ 'x-csrf-token': p.csrf, origin: 'https://evil.example' })).status,
    403,
    'foreign',
  )
  assert.equal((await send({ 'x-csrf-token': p.csrf })).status, 403, 'no Origin')
  assert.equal(
    (await send({ 'x-csrf-token': p.csrf, origin: 'null' })).status,
    403,
    'opaque Origin',
  )
  const [{ n }] = await s.sql`select count(*)::int as n from users
    where account_id = ${account.id} and email = 'csrf@people.test'`
  assert.equal(n, 0, 'nothing was written')
  assert.equal((await send({ ...own, 'x-csrf-token': p.csrf })).status, 201)
  // Reads need neither; a sign-out does, like any change.
  const read = await fetch(`${s.base}/api/v1/users`, {
    headers: { cookie: `service_session=${p.cookie}` },
  })
  assert.equal(read.status, 200)
  assert.equal(
    (await as(p, s.base, { 'x-csrf-token': '' })('POST', '/auth/v1/sign-out')).status,
    403,
  )
  assert.equal((await as(p)('GET', '/auth/v1/me')).status, 200)
  // Another site's form cannot sign its visitor in.
  assert.equal(
    (await signIn('manager@people.test', PASSWORD, s.base, { origin: 'https://evil.example' }))
      .status,
    403,
  )
})

test('sessions across two serve processes: sign-out, idle, age, password change and removal end them', async () => {
  const second = await startProcess(['serve'], s.url, { SERVICE_API_RATE_LIMIT: '100000' })
  try {
    const { id, invite_token } = await invite(account.id, 'two@people.test', 'admin')
    await setPassword(invite_token)
    const open = async () => {
      const res = await signIn('two@people.test', PASSWORD, second.base)
      assert.equal(res.status, 200)
      return { cookie: cookieOf(res.headers), csrf: res.body.csrf_token as string }
    }
    const me = async (p: { cookie: string; csrf: string }, base: string) =>
      (await as(p, base)('GET', '/auth/v1/me')).status
    // Signed in on the second, the first knows the session; signed out on the first, the second
    // refuses it at once.
    let p = await open()
    assert.deepEqual([await me(p, s.base), await me(p, second.base)], [200, 200])
    assert.equal((await as(p, s.base)('POST', '/auth/v1/sign-out')).status, 204)
    assert.deepEqual([await me(p, s.base), await me(p, second.base)], [401, 401])

    p = await open()
    await s.sql`update sessions set last_seen_at = now() - interval '12 hours 1 second'
      where account_id = ${account.id} and user_id = ${id}`
    assert.deepEqual([await me(p, second.base), await me(p, s.base)], [401, 401], '12 h idle')

    p = await open()
    await s.sql`update sessions set created_at = now() - interval '7 days 1 second'
      where account_id = ${account.id} and user_id = ${id}`
    assert.deepEqual([await me(p, second.base), await me(p, s.base)], [401, 401], '7 days old')

    // Used within the idle time, a session lives on (its last use is written).
    p = await open()
    await s.sql`update sessions set last_seen_at = now() - interval '11 hours'
      where account_id = ${account.id} and user_id = ${id}`
    assert.equal(await me(p, s.base), 200)
    const [{ idle }] =
      await s.sql`select max(now() - last_seen_at) < interval '1 minute' as idle from sessions
      where account_id = ${account.id} and user_id = ${id}`
    assert.equal(idle, true)

    const reset = await s.admin('POST', `/accounts/${account.id}/users/${id}/reset`)
    assert.equal(
      (await setPassword(reset.body.reset_token, 'changed password', second.base)).status,
      200,
    )
    assert.deepEqual(
      [await me(p, s.base), await me(p, second.base)],
      [401, 401],
      'password changed',
    )

    const q = await (async () => {
      const res = await signIn('two@people.test', 'changed password', second.base)
      return { cookie: cookieOf(res.headers), csrf: res.body.csrf_token as string }
    })()
    assert.equal(await me(q, s.base), 200)
    assert.equal((await as(people.admin, second.base)('DELETE', `/api/v1/users/${id}`)).status, 204)
    assert.deepEqual([await me(q, s.base), await me(q, second.base)], [401, 401], 'user removed')
    const [{ n }] =
      await s.sql`select count(*)::int as n from sessions where account_id = ${account.id}
      and user_id = ${id}`
    assert.equal(n, 0)
  } finally {
    await second.kill('SIGTERM')
  }
})

test("a cookie names its account: another account's id in front of a secret opens nothing", async () => {
  const [, secret] = people.admin.cookie.split('.')
  const forged = { cookie: `${other.id}.${secret}`, csrf: people.admin.csrf }
  assert.equal((await as(forged)('GET', '/auth/v1/me')).status, 401)
  assert.equal((await as(forged)('GET', '/api/v1/users')).status, 401)
  assert.equal((await as({ cookie: 'garbage', csrf: '' })('GET', '/api/v1/users')).status, 401)
})

test("an admin changes a user's role: validated, audited, in force at once for the user's sessions", async () => {
  const admin = as(people.admin)
  const p = await person(account.id, 'promoted@people.test', 'viewer')
  const theirs = as(p)
  assert.equal((await theirs('GET', '/api/v1/audit')).status, 403)
  const up = await admin('PATCH', `/api/v1/users/${p.id}`, { role: 'admin' })
  assert.equal(up.status, 200, JSON.stringify(up.body))
  assert.deepEqual(up.body, { id: p.id, email: 'promoted@people.test', name: null, role: 'admin' })
  // The same session, without signing in again: the new role is its role.
  assert.equal((await theirs('GET', '/auth/v1/me')).body.user.role, 'admin')
  assert.equal((await theirs('GET', '/api/v1/audit')).status, 200)
  const down = await s.admin('PATCH', `/accounts/${account.id}/users/${p.id}`, { role: 'manager' })
  assert.equal(down.status, 200, JSON.stringify(down.body))
  assert.equal((await theirs('GET', '/api/v1/audit')).status, 403)
  assert.equal((await theirs('PATCH', `/api/v1/users/${p.id}`, { role: 'admin' })).status, 403)

  const log = (await admin('GET', '/api/v1/audit?limit=50')).body.entries
  const ofRole = (action: string) => log.find((e: { action: string }) => e.action === action)
  const [byOperator, byAdmin] = [ofRole('setUserRole'), ofRole('setAccountUserRole')]
  assert.deepEqual(
    [byOperator.target, byAdmin.target],
    [`accounts/${account.id}/users/${p.id}`, `users/${p.id}`],
  )
  assert.deepEqual(
    [byOperator.action, byOperator.actor.type, byOperator.status],
    ['setUserRole', 'operator', 200],
  )
  assert.deepEqual(
    [byAdmin.action, byAdmin.actor, byAdmin.status],
    ['setAccountUserRole', { type: 'user', id: people.admin.id, name: people.admin.email }, 200],
  )

  for (const body of [{}, { role: 'owner' }, { role: 'admin', email: 'x@people.test' }]) {
    const res = await admin('PATCH', `/api/v1/users/${p.id}`, body)
    assert.equal(res.status, 400, JSON.stringify(body))
    assert.match(res.body.errors[0].path, /^\/(role|email)$/)
  }
  const foreign = await invite(other.id, 'foreign-role@other.test', 'viewer')
  assert.equal((await admin('PATCH', `/api/v1/users/${foreign.id}`, { role: 'admin' })).status, 404)
  assert.equal((await admin('PATCH', '/api/v1/users/x', { role: 'admin' })).status, 404)
  assert.equal((await s.admin('GET', `/accounts/${other.id}/users`)).body[0].role, 'viewer')
})

// The rule chosen: an account keeps at least one admin. Demoting or removing the last one is 409,
// for its admins and the operator alike; the operator makes another admin first.
test("the account's last admin is neither demoted nor removed, even by two admins at once", async () => {
  const solo = await s.account('Solo')
  const first = await person(solo.id, 'first@solo.test', 'admin')
  const last = await as(first)('PATCH', `/api/v1/users/${first.id}`, { role: 'viewer' })
  assert.equal(last.status, 409, JSON.stringify(last.body))
  assert.match(last.body.detail, /last admin/)
  assert.equal((await as(first)('DELETE', `/api/v1/users/${first.id}`)).status, 409)
  assert.equal(
    (await s.admin('PATCH', `/accounts/${solo.id}/users/${first.id}`, { role: 'manager' })).status,
    409,
  )
  assert.equal((await s.admin('DELETE', `/accounts/${solo.id}/users/${first.id}`)).status, 409)
  const refused = (await as(first)('GET', '/api/v1/audit?limit=10')).body.entries
  assert.deepEqual(
    refused.slice(0, 2).map((e: { action: string; status: number }) => [e.action, e.status]),
    [
      ['removeUser', 409],
      ['setUserRole', 409],
    ],
  )

  // Two admins demote each other at once: one change is made, the other is refused (409 when both
  // had passed their role's check, 403 when the first's change came before the second's check).
  const second = await person(solo.id, 'second@solo.test', 'admin')
  const both = await Promise.all([
    as(first)('PATCH', `/api/v1/users/${second.id}`, { role: 'viewer' }),
    as(second)('PATCH', `/api/v1/users/${first.id}`, { role: 'viewer' }),
  ])
  const statuses = both.map((r) => r.status).sort()
  assert.ok(statuses[0] === 200 && [403, 409].includes(statuses[1]), String(statuses))
  let roles = (await s.admin('GET', `/accounts/${solo.id}/users`)).body.map(
    (u: { role: Role }) => u.role,
  )
  assert.deepEqual(roles.sort(), ['admin', 'viewer'])
  // The same race below the HTTP layer, where both changes always reach the lock.
  const [admin] = (await s.admin('GET', `/accounts/${solo.id}/users`)).body.filter(
    (u: { role: Role }) => u.role === 'admin',
  )
  const third = await person(solo.id, 'third@solo.test', 'admin')
  const race = await Promise.allSettled([
    setRole(s.sql, solo.id, admin.id, 'viewer'),
    setRole(s.sql, solo.id, third.id, 'viewer'),
  ])
  assert.deepEqual(
    race.map((r) => (r.status === 'fulfilled' ? 200 : (r.reason as Refusal).status)).sort(),
    [200, 409],
  )
  roles = (await s.admin('GET', `/accounts/${solo.id}/users`)).body.map(
    (u: { role: Role }) => u.role,
  )
  assert.deepEqual(roles.sort(), ['admin', 'viewer', 'viewer'])
})

test("a removed user's name leaves the audit log: the entries stay, with their id", async () => {
  const admin = as(people.admin)
  const leaver = await person(account.id, 'leaver@people.test', 'admin')
  const stays = await person(account.id, 'stays@people.test', 'manager')
  assert.equal(
    (await as(leaver)('POST', '/api/v1/users', { email: 'made-by-leaver@people.test' })).status,
    201,
  )
  assert.equal(
    (await as(stays)('POST', '/api/v1/customer', { external_id: 'by-stays', name: 'Stays' }))
      .status,
    201,
  )
  const before = (await admin('GET', '/api/v1/audit?limit=50')).body.entries
  const theirs = before.filter((e: { actor: { id: number } }) => e.actor.id === leaver.id)
  assert.equal(theirs[0].actor.name, 'leaver@people.test')

  // The leaver removes themselves: that last entry names no one either.
  assert.equal((await as(leaver)('DELETE', `/api/v1/users/${leaver.id}`)).status, 204)
  const after = (await admin('GET', '/api/v1/audit?limit=50')).body.entries
  const blanked = after.filter((e: { actor: { id: number } }) => e.actor.id === leaver.id)
  assert.equal(blanked.length, theirs.length + 1)
  assert.equal(blanked[0].action, 'removeAccountUser')
  for (const e of blanked)
    assert.deepEqual(e.actor, { type: 'user', id: leaver.id, name: '(erased)' })
  assert.ok(after.some((e: { actor: { name: string } }) => e.actor.name === 'stays@people.test'))
  const [{ n }] = await s.sql`select count(*)::int as n from audit_entries
    where account_id = ${account.id} and actor_name = 'leaver@people.test'`
  assert.equal(n, 0)
})
