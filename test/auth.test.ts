import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService({ apiRateLimit: 5, trackRateLimit: 3 })
})
after(() => s.stop())

const KEYED = [
  '/api/v1/customers/search',
  '/api/v1/contacts/search',
  '/api/v1/customers',
  '/api/v1/contacts',
]
const post = (path: string, key?: string) =>
  s.call('POST', path, {}, key === undefined ? {} : { 'service-key': key })

const keyWith = async (accountId: number, scopes: string[]) =>
  (await s.admin('POST', `/accounts/${accountId}/keys`, { scopes })).body

test('search and upload: missing key 401, unknown or malformed key 403', async () => {
  const { id } = await s.account()
  const real = (await keyWith(id, ['search', 'upload'])).token as string
  for (const path of KEYED) {
    assert.equal((await post(path)).status, 401, path)
    assert.equal((await post(path, 'nonsense')).status, 403, path)
    assert.equal((await post(path, real.slice(0, -4) + 'AAAA')).status, 403, path)
    assert.equal((await post(path, `sk_999999_${'a'.repeat(43)}`)).status, 403, path)
  }
})

test('a revoked key is refused: 403 on search/upload, 401 on tracking', async () => {
  const { id } = await s.account()
  const key = await keyWith(id, ['search', 'upload', 'track'])
  assert.equal((await s.admin('DELETE', `/accounts/${id}/keys/${key.id}`)).status, 204)
  assert.equal((await post('/api/v1/customers/search', key.token)).status, 403)
  assert.equal((await post('/api/v1/customers', key.token)).status, 403)
  assert.equal((await post('/api/tracker/track', key.token)).status, 401)
  const listed = (await s.admin('GET', `/accounts/${id}/keys`)).body
  assert.ok(listed.find((k: any) => k.id === key.id).revoked_at)
})

test('a key lacking the scope gets 403 everywhere', async () => {
  const { id } = await s.account()
  const searchOnly = (await keyWith(id, ['search'])).token
  const uploadOnly = (await keyWith(id, ['upload'])).token
  assert.equal((await post('/api/v1/customers', searchOnly)).status, 403)
  assert.equal((await post('/api/v1/contacts', searchOnly)).status, 403)
  assert.equal((await post('/api/v1/customers/search', uploadOnly)).status, 403)
  assert.equal((await post('/api/tracker/track', searchOnly)).status, 403)
})

test('tracking: missing or unknown key 401', async () => {
  assert.equal((await post('/api/tracker/track')).status, 401)
  assert.equal((await post('/api/tracker/track', 'nonsense')).status, 401)
  assert.equal((await post('/api/tracker/track', `sk_1_${'b'.repeat(43)}`)).status, 401)
})

test('the per-key rate limit answers 429 with Retry-After and RateLimit headers, per key', async () => {
  const { id } = await s.account()
  const a = (await keyWith(id, ['search'])).token
  const b = (await keyWith(id, ['search'])).token
  // Up to 11 requests: even when a minute boundary splits them, two windows of 5 overflow.
  const statuses = []
  let last
  for (let i = 0; i < 11 && last?.status !== 429; i++) {
    last = await post('/api/v1/customers/search', a)
    statuses.push(last.status)
  }
  assert.ok(
    statuses.slice(0, 5).every((st) => st !== 429),
    `statuses ${statuses}`,
  )
  assert.equal(last!.status, 429, `statuses ${statuses}`)
  assert.equal(last!.headers.get('ratelimit-limit'), '5')
  assert.equal(last!.headers.get('ratelimit-remaining'), '0')
  const retry = Number(last!.headers.get('retry-after'))
  assert.ok(retry >= 1 && retry <= 60, `retry-after ${retry}`)
  assert.equal(last!.headers.get('ratelimit-reset'), String(retry))
  // Counters are per key.
  assert.notEqual((await post('/api/v1/customers/search', b)).status, 429)
})

test('counters live in Postgres, shared across processes', async () => {
  const { id } = await s.account()
  const key = await keyWith(id, ['search'])
  await post('/api/v1/customers/search', key.token)
  const [row] =
    await s.sql`select sum(count)::int as n from rate_limit_counters where account_id = ${id}
      and key_id = ${key.id}`
  assert.equal(row.n, 1)
})
