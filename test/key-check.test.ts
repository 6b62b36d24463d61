// The key checker against a real database, with a clock the test moves: counts within a process,
// counts shared between processes through Postgres, the minute windows, revocation, flushing.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { CHECK_MS, WINDOW_MS, keyChecker } from '../src/db/key-check.ts'
import { createAccount } from '../src/accounts/accounts.ts'
import { createKey, revokeKey } from '../src/accounts/keys.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService({}, { http: false, worker: false })
})
after(async () => {
  await s?.stop()
})

// A clock at the start of a window, moved by hand.
const clock = () => {
  let t = Math.ceil(Date.now() / WINDOW_MS) * WINDOW_MS
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms
    },
  }
}

const newKey = async () => {
  const account = await createAccount(s.sql, { name: 'Keys', source_of_truth: 'API' })
  const { token, ...key } = (await createKey(s.sql, account.id, {
    scopes: ['search'],
  } as never)) as {
    id: number
    token: string
  }
  return { accountId: account.id as number, keyId: key.id, token }
}

const stored = async (keyId: number, bucket = 'api') =>
  (
    await s.sql`select coalesce(sum(count), 0)::int as n from rate_limit_counters
      where key_id = ${keyId}
      and bucket = ${bucket}`
  )[0].n

const noErrors = (err: unknown) => {
  throw err
}

test('requests are numbered in order within a window, and Postgres holds them after a check', async () => {
  const { accountId, keyId, token } = await newKey()
  const time = clock()
  const keys = keyChecker(s.sql, noErrors, time.now)
  const counts = []
  for (let i = 0; i < 5; i++) counts.push((await keys.count(accountId, token, 'api'))!.count)
  assert.deepEqual(counts, [1, 2, 3, 4, 5])
  assert.equal(await stored(keyId), 1, 'only the first request checked')
  time.advance(CHECK_MS)
  assert.equal((await keys.count(accountId, token, 'api'))!.count, 6)
  assert.equal(await stored(keyId), 6)
  // Concurrent requests each get their own number.
  const burst = await Promise.all(
    Array.from({ length: 10 }, () => keys.count(accountId, token, 'api')),
  )
  assert.deepEqual(
    burst.map((c) => c!.count).sort((a, b) => a - b),
    [7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
  )
  // Buckets count apart.
  assert.equal((await keys.count(accountId, token, 'track'))!.count, 1)
  await keys.flush()
  assert.equal(await stored(keyId), 16)
  assert.equal(await stored(keyId, 'track'), 1)
})

test('a new window counts from one', async () => {
  const { accountId, token } = await newKey()
  const time = clock()
  const keys = keyChecker(s.sql, noErrors, time.now)
  for (let i = 0; i < 3; i++) await keys.count(accountId, token, 'api')
  time.advance(WINDOW_MS - 1)
  assert.equal((await keys.count(accountId, token, 'api'))!.count, 4)
  time.advance(1)
  const next = (await keys.count(accountId, token, 'api'))!
  assert.equal(next.count, 1)
  assert.equal(next.windowStart, time.now())
})

test('processes share the count through Postgres, each learning of the others at its next check', async () => {
  const { accountId, keyId, token } = await newKey()
  const time = clock()
  const a = keyChecker(s.sql, noErrors, time.now)
  const b = keyChecker(s.sql, noErrors, time.now)
  for (let i = 0; i < 4; i++) await a.count(accountId, token, 'api')
  await a.flush()
  assert.equal(
    (await b.count(accountId, token, 'api'))!.count,
    5,
    'b read the 4 of a at its first check',
  )
  await a.count(accountId, token, 'api')
  assert.equal(
    (await b.count(accountId, token, 'api'))!.count,
    6,
    'b does not know of the fifth of a before its next check',
  )
  await b.flush()
  time.advance(CHECK_MS)
  assert.equal(
    (await a.count(accountId, token, 'api'))!.count,
    8,
    'a checked: 5 of its own, 2 of b, this one',
  )
  assert.equal(await stored(keyId), 8)
})

test('a revocation reaches a process at its next check, or at once through forget', async () => {
  const time = clock()
  const keys = keyChecker(s.sql, noErrors, time.now)
  const first = await newKey()
  assert.equal((await keys.count(first.accountId, first.token, 'api'))!.key.revoked_at, null)
  await revokeKey(s.sql, first.accountId, first.keyId)
  assert.equal(
    (await keys.count(first.accountId, first.token, 'api'))!.key.revoked_at,
    null,
    'not yet checked again',
  )
  time.advance(CHECK_MS)
  assert.ok((await keys.count(first.accountId, first.token, 'api'))!.key.revoked_at)
  const second = await newKey()
  await keys.count(second.accountId, second.token, 'api')
  await revokeKey(s.sql, second.accountId, second.keyId)
  keys.forget()
  assert.ok((await keys.count(second.accountId, second.token, 'api'))!.key.revoked_at)
})

test('unknown tokens and tokens of another account find no key', async () => {
  const keys = keyChecker(s.sql, noErrors)
  const { accountId, token } = await newKey()
  assert.equal(await keys.count(accountId, `${token.slice(0, -4)}AAAA`, 'api'), undefined)
  assert.equal(await keys.count(accountId + 1, token, 'api'), undefined)
})

test('counts left between checks reach Postgres on their own', async () => {
  const { accountId, keyId, token } = await newKey()
  const keys = keyChecker(s.sql, noErrors)
  for (let i = 0; i < 3; i++) await keys.count(accountId, token, 'api')
  assert.equal(await stored(keyId), 1)
  await new Promise((r) => setTimeout(r, CHECK_MS * 2 + 100))
  assert.equal(await stored(keyId), 3)
})

test('a request that joins a check already under way has its count saved one interval later', async () => {
  const { accountId, keyId, token } = await newKey()
  const keys = keyChecker(s.sql, noErrors)
  await Promise.all([keys.count(accountId, token, 'api'), keys.count(accountId, token, 'api')])
  assert.equal(await stored(keyId), 1, 'the check counted the request that started it')
  await new Promise((r) => setTimeout(r, CHECK_MS * 2 + 100))
  assert.equal(await stored(keyId), 2)
})

test('a key gone from the database is forgotten at the next check, by every request waiting on it', async () => {
  const { accountId, keyId, token } = await newKey()
  const time = clock()
  const keys = keyChecker(s.sql, noErrors, time.now)
  assert.ok(await keys.count(accountId, token, 'api'))
  await s.sql`delete from rate_limit_counters where key_id = ${keyId}`
  await s.sql`delete from api_keys where id = ${keyId}`
  time.advance(CHECK_MS)
  const waiting = await Promise.all(
    Array.from({ length: 3 }, () => keys.count(accountId, token, 'api')),
  )
  assert.deepEqual(waiting, [undefined, undefined, undefined])
})
