// A webhook receiver that is down for a minute, in real time (webhookRetryScale 1): its port
// refuses connections, then a receiver listens on it again. A is uploaded as the outage begins
// and uses up its three attempts; B is uploaded 40 s in and its third attempt, 20-30 s after
// the second, finds the receiver back; C after the outage goes through at once; A redelivered
// arrives unchanged.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { verify } from '@octokit/webhooks-methods'
import { Webhook } from 'standardwebhooks'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually, startReceiver } from './helpers/receiver.ts'
import {
  deliveryJobs,
  listDeliveries,
  standardHeaders,
  subscribe,
  upload,
  type Delivery,
} from './helpers/webhooks.ts'
import { retryDelaySeconds } from '../src/webhooks/send.ts'

let s: TestService
before(async () => {
  s = await startTestService()
})
after(() => s.stop())

const OUTAGE_MS = 60_000
// Uploaded this far into the outage, B's second attempt (4-6 s later) still meets the closed port
// and its third (another 20-30 s later) comes after the minute is over.
const B_AT_MS = 40_000

const sleepUntil = (time: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, time - Date.now())))

const attempts = (d: Delivery) => d.attempts.map((a) => [a.attempt, a.status_code])
const attemptTimes = (d: Delivery) => d.attempts.map((a) => Date.parse(a.at))

// Retry n waits retryDelaySeconds(n), ±20%, counted from the end of the failed attempt, so it can
// never come early; it may come late on a loaded machine, hence the loose upper bounds.
const assertRetryGaps = (d: Delivery) => {
  const at = attemptTimes(d)
  for (const n of [1, 2]) {
    const gap = at[n] - at[n - 1]
    const [min, max] = [
      retryDelaySeconds(n, () => 0) * 1000,
      retryDelaySeconds(n, () => 1) * 1000 + 10_000,
    ]
    assert.ok(
      gap >= min && gap <= max,
      `delivery ${d.id}: attempt ${n + 1} came ${gap} ms after attempt ${n}, not in ${min}..${max}`,
    )
  }
}

const ownPort = async (): Promise<Awaited<ReturnType<typeof startReceiver>>> => {
  for (;;) {
    try {
      return await startReceiver(undefined, 20_000 + Math.floor(Math.random() * 12_000))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error
    }
  }
}

test('a receiver down for a minute: deliveries follow the retry rules', async (t) => {
  const account = await scoredAccount(s)
  // Started only to own a port for the webhook's URL, then closed: connections are refused. The
  // port is below the ephemeral range (32768 and up on Linux), so that no connection made on a busy
  // machine during the outage takes it as its own local port.
  const down = await ownPort()
  const { hookId, secret } = await subscribe(s, account.id, down.url)
  await down.close()
  const outageStart = Date.now()

  const newest = async () => (await listDeliveries(s, account, hookId, '?limit=1'))[0]
  const find = async (id: number) =>
    (await listDeliveries(s, account, hookId)).find((d) => d.id === id)!
  const when = (id: number, ready: (d: Delivery) => boolean, what: string) =>
    eventually(
      async () => {
        const d = await find(id)
        return ready(d) && d
      },
      what,
      60_000,
    )
  const refusedOnly = (d: Delivery) =>
    d.attempts.every((a) => a.status_code === null && /ECONNREFUSED/.test(a.error))

  await upload(account, [{ external_id: 'a', name: 'A' }])
  const a = await when((await newest()).id, (d) => d.status !== 'pending', 'A to give up')
  assert.equal(a.status, 'failed')
  assert.deepEqual(attempts(a), [
    [1, null],
    [2, null],
    [3, null],
  ])
  assert.ok(refusedOnly(a), JSON.stringify(a.attempts))
  assertRetryGaps(a)
  await eventually(async () => (await deliveryJobs(s, account.id, a.id)) === 0, 'no job left for A')

  await sleepUntil(outageStart + B_AT_MS)
  await upload(account, [{ external_id: 'b', name: 'B' }])
  const bId = (await newest()).id
  const bDown = await when(bId, (d) => d.attempts.length === 2, "B's second attempt")
  assert.ok(refusedOnly(bDown), JSON.stringify(bDown.attempts))

  await sleepUntil(outageStart + OUTAGE_MS)
  const r = await startReceiver(undefined, down.port)
  t.after(() => r.close())
  const upAt = Date.now()
  assert.ok(attemptTimes(a).every((at) => at < upAt))
  assert.equal(
    (await find(bId)).attempts.length,
    2,
    "B's third attempt came before the receiver was back",
  )

  await upload(account, [{ external_id: 'c', name: 'C' }])
  const c = await when((await newest()).id, (d) => d.status !== 'pending', 'C')
  assert.equal(c.status, 'delivered')
  assert.deepEqual(attempts(c), [[1, 200]])

  const again = await s.admin(
    'POST',
    `/accounts/${account.id}/webhooks/${hookId}/deliveries/${a.id}/redeliver`,
  )
  assert.equal(again.status, 202, JSON.stringify(again.body))
  assert.deepEqual(again.body, { id: a.id, status: 'pending', first_attempt: 4 })
  const aAgain = await when(a.id, (d) => d.status !== 'pending', 'A redelivered')
  assert.equal(aAgain.status, 'delivered')
  assert.deepEqual(attempts(aAgain), [
    [1, null],
    [2, null],
    [3, null],
    [4, 200],
  ])

  const b = await when(bId, (d) => d.status !== 'pending', 'B to settle')
  assert.equal(b.status, 'delivered')
  assert.deepEqual(attempts(b), [
    [1, null],
    [2, null],
    [3, 200],
  ])
  assertRetryGaps(b)
  assert.ok(attemptTimes(b)[2] >= upAt)

  // One request each, carrying the bytes frozen when its customers were created, freshly signed.
  const frozen = new Map(
    (
      await s.sql`
    select message_id, payload from webhook_deliveries where account_id = ${account.id}`
    ).map((d) => [d.message_id, d.payload]),
  )
  const ids = [a, b, c].map((d) => d.message_id)
  assert.deepEqual(r.requests.map((req) => req.headers['webhook-id']).sort(), [...ids].sort())
  for (const req of r.requests) {
    assert.equal(req.raw.toString('utf8'), frozen.get(req.headers['webhook-id'] as string))
    assert.equal(
      await verify(secret, req.raw.toString('utf8'), String(req.headers['x-service-hmac'])),
      true,
    )
    new Webhook(secret).verify(req.raw, standardHeaders(req.headers))
    assert.ok(
      Number(req.headers['webhook-timestamp']) * 1000 >= Math.floor(upAt / 1000) * 1000,
      'signed at the time of sending',
    )
  }
  const bodyOf = (d: Delivery) =>
    r.requests.find((req) => req.headers['webhook-id'] === d.message_id)!.json
  assert.deepEqual(
    [a, b, c].map((d) => bodyOf(d).data.customers.map((x: any) => x.external_id)),
    [['a'], ['b'], ['c']],
  )
  // Each body keeps the time of its upload however late it arrived: A's is a minute old.
  const stamps = [a, b, c].map((d) => Date.parse(bodyOf(d).timestamp))
  assert.ok(
    stamps[0] < outageStart + 10_000 &&
      stamps[0] < stamps[1] &&
      stamps[1] < upAt &&
      upAt <= stamps[2],
    JSON.stringify({ outageStart, upAt, stamps }),
  )
})
