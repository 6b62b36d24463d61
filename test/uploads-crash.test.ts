import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from '../src/db/client.ts'
import { startTestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { startProcess } from './helpers/process.ts'

const MONTHS = Array.from({ length: 12 }, (_, i) => `2026-${String(i + 1).padStart(2, '0')}-01`)

const sigkillTitle =
  'a worker killed with SIGKILL mid-processing: after a restart every record is stored exactly once ' +
  'and every upload processed'
test(sigkillTitle, async () => {
  // HTTP in this process, jobs in a child process that is killed.
  const s = await startTestService({ apiRateLimit: 100_000 }, { http: true, worker: false })
  const sql = connect(s.url)
  try {
    const a = await scoredAccount(s)
    await s.admin('POST', `/accounts/${a.id}/users`, { email: 'second@acme.test' })
    const UPLOADS = 6
    for (let u = 0; u < UPLOADS; u++) {
      const customers = Array.from({ length: 1000 }, (_, i) => ({
        external_id: `u${u}-c${i}`,
        name: `C ${i}`,
        attributes: { country: 'US' },
        metrics: MONTHS.map((date, m) => ({ date, logins: m, seats: i % 7 })),
      }))
      assert.equal((await a.api('/api/v1/customers', { customers })).status, 200)
    }
    let worker = await startProcess(['worker'], s.url)
    // Kill as soon as a job holds its lock, i.e. in the middle of processing an upload, once the
    // holder's heartbeat is written: a worker that dies before its first heartbeat is presumed dead
    // only after 30 minutes (db/queue.ts), which this test would wait for.
    for (let i = 0; i < 600; i++) {
      const [{ n }] = await sql`select count(*)::int as n from graphile_worker.jobs
          where task_identifier = 'process_upload'
          and locked_at is not null and locked_by in (select worker_id from worker_heartbeats)`
      if (n > 0) break
      await new Promise((r) => setTimeout(r, 10))
    }
    await worker.kill('SIGKILL')
    const [{ done }] =
      await sql`select count(*)::int as done from uploads where status = 'processed'`
    assert.ok(done < UPLOADS, 'the worker died before finishing')
    const [{ locked }] = await sql`select count(*)::int as locked from graphile_worker.jobs
        where locked_at is not null`
    assert.ok(locked > 0, 'the dead worker left a job locked')
    worker = await startProcess(['worker'], s.url)
    try {
      let pending = -1
      for (let i = 0; i < 900 && pending !== 0; i++) {
        ;[{ pending }] =
          await sql`select count(*)::int as pending from uploads where status <> 'processed'`
        if (pending) await new Promise((r) => setTimeout(r, 100))
      }
      assert.equal(pending, 0, 'uploads left unprocessed after the restart')
      const [counts] = await sql`
        select (select count(*)::int from customers where account_id = ${a.id}) as customers,
               (select count(distinct external_id)::int from customers where account_id = ${a.id})
                 as distinct_ids,
               (select count(*)::int from customer_snapshots where account_id = ${a.id})
                 as snapshots,
               (select count(*)::int from notifications where account_id = ${a.id})
                 as notifications,
               (select sum(created)::int from uploads where account_id = ${a.id}) as created`
      assert.deepEqual(
        { ...counts },
        {
          customers: UPLOADS * 1000,
          distinct_ids: UPLOADS * 1000,
          snapshots: UPLOADS * 1000 * 12,
          notifications: UPLOADS * 2,
          created: UPLOADS * 1000,
        },
      )
    } finally {
      await worker.kill('SIGTERM')
    }
  } finally {
    await sql.end()
    await s.stop()
  }
})
