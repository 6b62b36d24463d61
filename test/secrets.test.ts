import { test } from 'node:test'
import assert from 'node:assert/strict'
import { freshDatabase } from './helpers/db.ts'
import { ADMIN_TOKEN } from './helpers/service.ts'
import { startProcess } from './helpers/process.ts'
import { startReceiver } from './helpers/receiver.ts'

// Every log line of a serve process at its most talkative level, through a session that handles
// each kind of secret: the admin token, API keys (valid, revoked, wrong), webhook secrets (created,
// rotated, used to sign a delivery). None may appear in what the process writes.
test('secrets never reach the logs', async () => {
  const db = await freshDatabase()
  const serve = await startProcess(['serve'], db.url, { LOG_LEVEL: 'debug' })
  const receiver = await startReceiver()
  try {
    const call = async (
      method: string,
      path: string,
      headers: Record<string, string>,
      body?: unknown,
    ) => {
      const res = await fetch(serve.base + path, {
        method,
        headers: { 'content-type': 'application/json', ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: res.status, body: await res.json().catch(() => undefined) }
    }
    const admin = (method: string, path: string, body?: unknown) =>
      call(method, `/admin/v1${path}`, { authorization: `Bearer ${ADMIN_TOKEN}` }, body)

    const account = (await admin('POST', '/accounts', { name: 'Secrets' })).body
    const key = (await admin('POST', `/accounts/${account.id}/keys`, {})).body
    const revoked = (await admin('POST', `/accounts/${account.id}/keys`, {})).body
    assert.equal((await admin('DELETE', `/accounts/${account.id}/keys/${revoked.id}`)).status, 204)
    await admin('POST', `/accounts/${account.id}/properties`, {
      entity: 'customer',
      kind: 'metric',
      codename: 'logins',
      type: 'number',
    })
    assert.equal(
      (
        await admin('PUT', `/accounts/${account.id}/scoring`, {
          customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 10 }] },
        })
      ).status,
      200,
    )
    const hook = (
      await admin('POST', `/accounts/${account.id}/webhooks`, {
        url: receiver.url,
        events: ['customer.created'],
      })
    ).body
    const rotated = (
      await admin('POST', `/accounts/${account.id}/webhooks/${hook.id}/rotate-secret`)
    ).body

    const wrong = `${key.token.slice(0, -4)}abcd`
    assert.equal((await call('GET', '/api/v1/customer/c1', { 'service-key': wrong })).status, 403)
    assert.equal(
      (await call('GET', '/api/v1/customer/c1', { 'service-key': revoked.token })).status,
      403,
    )
    assert.equal(
      (await call('GET', '/admin/v1/accounts/1', { authorization: 'Bearer not-the-admin-token' }))
        .status,
      401,
    )
    assert.equal(
      (
        await call(
          'POST',
          '/api/v1/customer',
          { 'service-key': key.token },
          { external_id: 'c1', name: 'One' },
        )
      ).status,
      201,
    )
    await receiver.waitFor(1)

    const secrets = {
      admin: ADMIN_TOKEN,
      key: key.token,
      revoked: revoked.token,
      wrong,
      hook: hook.secret,
      rotated: rotated.secret,
    }
    for (const [name, secret] of Object.entries(secrets))
      assert.ok(typeof secret === 'string' && secret.length >= 16, name)
    await serve.kill('SIGTERM')
    const output = serve.stdout() + serve.stderr()
    // The logs are really there: one line per request, the failed authentications included.
    const lines = serve
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
    assert.ok(
      lines.filter((l) => l.msg === 'request' && l.status >= 401 && l.status <= 403).length >= 3,
    )
    assert.ok(
      lines.some((l) => l.msg === 'request' && l.status === 201 && l.path === '/api/v1/customer'),
    )
    for (const [name, secret] of Object.entries(secrets)) {
      assert.ok(!output.includes(secret), `the ${name} secret is in the logs`)
      // Nor its secret part alone: sk_<account>_<secret>, whsec_<secret>. (The secret part may
      // itself hold '_', so the prefix is cut, not the last piece taken.)
      const part = secret.replace(/^(sk_\d+_|whsec_)/, '')
      assert.ok(
        part.length >= 16 && !output.includes(part),
        `the ${name} secret's part is in the logs`,
      )
    }
  } finally {
    await serve.kill()
    await receiver.close()
    await db.drop()
  }
})

// A log line is out of an erasure's reach, so it names the route, never the ids in the path.
test("request logs name the route's pattern, never a contact's external ids", async () => {
  const db = await freshDatabase()
  const serve = await startProcess(['serve'], db.url, { LOG_LEVEL: 'info' })
  try {
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }
    const account = await (
      await fetch(`${serve.base}/admin/v1/accounts`, {
        method: 'POST',
        headers: admin,
        body: '{"name":"Logs"}',
      })
    ).json()
    const key = await (
      await fetch(`${serve.base}/admin/v1/accounts/${account.id}/keys`, {
        method: 'POST',
        headers: admin,
        body: '{}',
      })
    ).json()
    const headers = { 'service-key': key.token, 'content-type': 'application/json' }
    const contact = `${serve.base}/api/v1/customer/acme-7f3q/contact/pat-9k2w`
    assert.equal((await fetch(contact, { headers })).status, 404)
    assert.equal((await fetch(contact, { method: 'DELETE', headers })).status, 404)
    // No route: nothing of the path is logged either.
    assert.equal(
      (await fetch(`${serve.base}/api/v1/customer/acme-7f3q/nothing/pat-9k2w`, { headers })).status,
      404,
    )
    await serve.kill('SIGTERM')
    const requests = serve
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'request' && l.status === 404)
    assert.deepEqual(
      requests.map((l) => [l.method, l.path]),
      [
        ['GET', '/api/v1/customer/:external_id/contact/:contact_id'],
        ['DELETE', '/api/v1/customer/:external_id/contact/:contact_id'],
        ['GET', null],
      ],
    )
    assert.ok(
      !/acme-7f3q|pat-9k2w/.test(serve.stdout() + serve.stderr()),
      'an external id is in the logs',
    )
  } finally {
    await serve.kill()
    await db.drop()
  }
})
