// A worker SIGKILLed while a webhook is on the wire: the delivery's job stays locked by the dead
// worker (graphile-worker alone would leave it for 4 hours) until src/jobs/recovery.ts sees the
// worker's heartbeat go stale, and a restarted worker then delivers it.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type TestService } from './helpers/service.ts'
import { startProcess } from './helpers/process.ts'
import { scoredAccount, waitForUpload } from './helpers/fixtures.ts'
import { eventually, startReceiver } from './helpers/receiver.ts'
import { unlockDeadWorkers } from '../src/db/queue.ts'

let s: TestService
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 }, { http: true, worker: false })
})
after(() => s.stop())

const heartbeatIds = async () =>
  (await s.sql`select worker_id from worker_heartbeats order by 1`).map(
    (r) => r.worker_id as string,
  )

test('a worker killed mid-delivery: the webhook still arrives after a restart', async (t) => {
  const account = await scoredAccount(s)
  let held = false
  // The first 1000-customer batch is never answered: the worker is killed while waiting for it.
  const r = await startReceiver((req) => {
    if (req.json.data.batch.total_customers !== 1000 || held) return 200
    held = true
    return new Promise<number>(() => {})
  })
  const workers: Awaited<ReturnType<typeof startProcess>>[] = []
  try {
    await s.admin('POST', `/accounts/${account.id}/webhooks`, {
      url: r.url,
      events: ['customer.created'],
    })
    const delivery = async (total: number) =>
      (
        await s.sql`
      select id, status, message_id from webhook_deliveries
      where account_id = ${account.id} and payload::json
        #>> '{data,batch,total_customers}' = ${String(total)}`
      )[0]
    const upload = async (from: number, n: number) => {
      const res = await account.api('/api/v1/customers', {
        customers: Array.from({ length: n }, (_, i) => ({
          external_id: `c${from + i}`,
          name: `Customer ${from + i}`,
        })),
      })
      assert.equal(res.status, 200, JSON.stringify(res.body))
      return res.body.upload_id as number
    }

    const first = await startProcess(['worker'], s.url)
    workers.push(first)
    const firstIds = await eventually(async () => {
      const ids = await heartbeatIds()
      return ids.length > 0 && ids
    }, 'the first worker to beat')

    // 500 customers, delivered normally before the crash.
    await waitForUpload(account.api, await upload(0, 500))
    const small = await eventually(async () => {
      const d = await delivery(500)
      return d?.status === 'delivered' && d
    }, 'the 500 batch')
    // 1000 customers: committed, then its webhook is on the wire when the worker dies.
    await upload(500, 1000)
    await eventually(() => held, 'the 1000 batch to reach the receiver')
    const big = (await delivery(1000))!
    const [job] = await s.sql`select locked_by from graphile_worker.jobs
        where key = ${`webhook_delivery:${account.id}:${big.id}`}`
    assert.ok(firstIds.includes(job.locked_by), 'the delivery job is locked by the first worker')
    await first.kill('SIGKILL')
    const killedAt = Date.now()
    assert.equal((await delivery(1000))!.status, 'pending')

    const second = await startProcess(['worker'], s.url)
    workers.push(second)
    await eventually(
      async () => (await delivery(1000))!.status === 'delivered',
      'the interrupted delivery after the restart',
      150_000,
    )
    t.diagnostic(`delivered ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the SIGKILL`)

    // The interrupted attempt left no row; the delivered one is attempt 1.
    const attempts =
      await s.sql`select attempt, status_code from webhook_attempts where account_id = ${account.id}
      and delivery_id = ${big.id}`
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.status_code]),
      [[1, 200]],
    )
    const bigCopies = r.requests.filter((req) => req.headers['webhook-id'] === big.message_id)
    assert.equal(bigCopies.length, 2)
    assert.deepEqual(bigCopies[1].raw, bigCopies[0].raw)
    assert.equal(
      r.requests.filter((req) => req.headers['webhook-id'] === small.message_id).length,
      1,
    )

    // At least once for every customer; twice only for the interrupted batch.
    const counts = new Map<number, number>()
    for (const req of r.requests)
      for (const c of req.json.data.customers)
        counts.set(c.service_id, (counts.get(c.service_id) ?? 0) + 1)
    const stored = await s.sql`select service_id from customers where account_id = ${account.id}
        order by service_id`
    assert.equal(stored.length, 1500)
    assert.deepEqual(
      [...counts.keys()].sort((a, b) => a - b),
      stored.map((c) => c.service_id),
    )
    const interrupted = new Set(
      bigCopies[0].json.data.customers.map((c: { service_id: number }) => c.service_id),
    )
    for (const [id, n] of counts) assert.equal(n, interrupted.has(id) ? 2 : 1, `service_id ${id}`)

    // A clean stop takes the worker's heartbeats with it.
    assert.equal(await second.kill('SIGTERM'), 0)
    assert.ok((await heartbeatIds()).every((id) => firstIds.includes(id)))
  } finally {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) await w.kill('SIGKILL')
    await r.close()
  }
})

test('unlockDeadWorkers releases the locks of stale and long-unknown workers only', async () => {
  const db = await startTestService({}, { http: false, worker: false })
  try {
    const sql = db.sql
    const holders: [string, string, string | null][] = [
      // worker id, locked for, heartbeat age (null: no heartbeat row)
      ['fresh', '2 hours', '1 second'],
      ['stale', '1 minute', '1 minute'],
      ['ghost-old', '1 hour', null],
      ['ghost-new', '1 minute', null],
    ]
    for (const [id, lockedFor, age] of holders) {
      await sql`select graphile_worker.add_job('noop', '{}', queue_name => ${`q-${id}`},
        job_key => ${id})`
      await sql`update graphile_worker._private_jobs
        set locked_by = ${id}, locked_at = now() - ${lockedFor}::interval
        where key = ${id}`
      await sql`update graphile_worker._private_job_queues
        set locked_by = ${id}, locked_at = now() - ${lockedFor}::interval
          where queue_name = ${`q-${id}`}`
      if (age) await sql`insert into worker_heartbeats values (${id}, now() - ${age}::interval)`
    }
    await sql`insert into worker_heartbeats values ('ancient', now() - interval '2 hours')`
    assert.deepEqual((await unlockDeadWorkers(sql)).sort(), ['ghost-old', 'stale'])
    const jobs = await sql`select key, locked_by from graphile_worker.jobs order by key`
    assert.deepEqual(
      jobs.map((j) => [j.key, j.locked_by]),
      [
        ['fresh', 'fresh'],
        ['ghost-new', 'ghost-new'],
        ['ghost-old', null],
        ['stale', null],
      ],
    )
    const queues = await sql`select queue_name, locked_by from graphile_worker._private_job_queues
        order by queue_name`
    assert.deepEqual(
      queues.map((q) => [q.queue_name, q.locked_by]),
      [
        ['q-fresh', 'fresh'],
        ['q-ghost-new', 'ghost-new'],
        ['q-ghost-old', null],
        ['q-stale', null],
      ],
    )
    assert.deepEqual(
      (await sql`select worker_id from worker_heartbeats order by 1`).map((r) => r.worker_id),
      ['fresh', 'stale'],
    )
  } finally {
    await db.stop()
  }
})
