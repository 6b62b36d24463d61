// An immediate PostgreSQL restart (what `pg_ctl restart -m immediate` does: SIGQUIT to the
// postmaster, then crash recovery) while uploads and tracked events are being received and
// processed. Jobs whose outcome could not be recorded stayed locked by the live worker's pool, and
// the account's whole queue waited for SERVICE_JOB_LOCK_TIMEOUT (15 min); the worker now releases
// the locks of jobs it no longer runs (src/db/recovery.ts).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { alive, startEmbedded } from '../src/db/embedded.ts'
import { connect } from '../src/db/client.ts'
import { unlockLostJobs } from '../src/db/queue.ts'
import { freePort } from './helpers/cluster.ts'
import { startProcess } from './helpers/process.ts'
import { ADMIN_TOKEN, startTestService } from './helpers/service.ts'

const call = (
  base: string,
  path: string,
  headers: Record<string, string>,
  body: unknown,
  method = 'POST',
) =>
  fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => undefined) }))

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const title =
  'an immediate PostgreSQL restart under load: the queue moves again within 30 s and all is processed'
test(title, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'service-pg-restart-'))
  chmodSync(dir, 0o755)
  const port = await freePort()
  let pg = await startEmbedded(join(dir, 'pg'), port)
  // The lock timeout as shipped: only the worker's own release can free the queue in time.
  const serve = await startProcess(['serve'], pg.url, { SERVICE_API_RATE_LIMIT: '1000000' })
  try {
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
    const account = (await call(serve.base, '/admin/v1/accounts', admin, { name: 'Restart' })).body
    const metric = { entity: 'customer', kind: 'metric', codename: 'logins', type: 'number' }
    await call(serve.base, `/admin/v1/accounts/${account.id}/properties`, admin, metric)
    const setup = [
      ['/tracking', { domains: ['restart.test'] }],
      [
        '/scoring',
        { customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 10 }] } },
      ],
    ] as const
    for (const [path, body] of setup) {
      const res = await call(
        serve.base,
        `/admin/v1/accounts/${account.id}${path}`,
        admin,
        body,
        'PUT',
      )
      assert.equal(res.status, 200, JSON.stringify(res.body))
    }
    const key = (await call(serve.base, `/admin/v1/accounts/${account.id}/keys`, admin, {})).body
    const headers = { 'service-key': key.token as string }
    const acknowledged = { uploads: [] as number[], events: 0 }
    let sending = true
    const uploads = (async () => {
      for (let n = 0; sending; n++) {
        const customers = Array.from({ length: 20 }, (_, i) => ({
          external_id: `c${n}-${i}`,
          name: `C ${n}`,
        }))
        const res = await call(serve.base, '/api/v1/customers', headers, { customers }).catch(
          () => undefined,
        )
        if (res?.status === 200) acknowledged.uploads.push(res.body.upload_id)
        await sleep(5)
      }
    })()
    const tracking = (async () => {
      for (let n = 0; sending; n++) {
        const events = Array.from({ length: 20 }, (_, i) => ({
          name: 'login',
          timestamp: Date.now(),
          identification: { customer: `c${n}-${i}` },
        }))
        const body = { trackerKey: account.tracker_key, events }
        const res = await call(serve.base, '/api/tracker/track', headers, body).catch(
          () => undefined,
        )
        if (res?.status === 200) acknowledged.events += events.length
        await sleep(5)
      }
    })()
    await sleep(1500)
    // Immediate shutdown: every backend dies at once, nothing is checkpointed.
    const postmaster = Number(
      readFileSync(join(pg.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0],
    )
    process.kill(postmaster, 'SIGQUIT')
    while (alive(postmaster)) await sleep(20)
    await pg.stop()
    pg = await startEmbedded(join(dir, 'pg'), port)
    const restarted = Date.now()
    await sleep(1000)
    sending = false
    await Promise.all([uploads, tracking])
    assert.ok(
      acknowledged.uploads.length > 0 && acknowledged.events > 0,
      'traffic was acknowledged',
    )

    const sql = connect(pg.url)
    try {
      const left = async () => {
        const [row] = await sql`select
          (select count(*)::int from uploads where status <> 'processed') as uploads,
          (select count(*)::int from tracking_events where status = 'received') as events`
        return row
      }
      let pending = await left()
      while ((pending.uploads || pending.events) && Date.now() - restarted < 30_000) {
        await sleep(200)
        pending = await left()
      }
      const locks = await sql`select task_identifier, locked_by, locked_at from graphile_worker.jobs
        where locked_by is not null`
      assert.deepEqual(
        pending,
        { uploads: 0, events: 0 },
        `30 s after the restart; locked: ${JSON.stringify(locks)}`,
      )
      t.diagnostic(
        `queue drained ${((Date.now() - restarted) / 1000).toFixed(1)} s after the restart`,
      )
      const processed =
        await sql`select id from uploads where account_id = ${account.id} and status = 'processed'
        and id = any(${acknowledged.uploads}::bigint[])`
      assert.equal(
        processed.length,
        acknowledged.uploads.length,
        'every acknowledged upload is processed',
      )
      const [{ events }] = await sql`select count(*)::int as events from tracking_events
        where account_id = ${account.id}`
      assert.ok(
        events >= acknowledged.events,
        `every acknowledged event is stored (${events} of ${acknowledged.events})`,
      )
    } finally {
      await sql.end()
    }
    assert.equal(serve.child.exitCode, null, `the service process died: ${serve.stderr()}`)
  } finally {
    serve.child.kill('SIGKILL')
    await pg.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('unlockLostJobs frees only our own locks of jobs not running here, once older than the grace', async () => {
  const db = await startTestService({}, { http: false, worker: false })
  try {
    const sql = db.sql
    // job key, holder, locked for
    const holders: [string, string, string][] = [
      ['running', 'pool-ours', '1 minute'],
      ['lost', 'pool-ours', '1 minute'],
      ['taking', 'pool-ours', '1 second'],
      ['theirs', 'pool-theirs', '1 minute'],
    ]
    for (const [key, holder, lockedFor] of holders) {
      await sql`select graphile_worker.add_job('noop', '{}', queue_name => ${`q-${key}`},
        job_key => ${key})`
      await sql`update graphile_worker._private_jobs set locked_by = ${holder},
        locked_at = now() - ${lockedFor}::interval where key = ${key}`
      await sql`update graphile_worker._private_job_queues set locked_by = ${holder},
        locked_at = now() - ${lockedFor}::interval where queue_name = ${`q-${key}`}`
    }
    const [{ id: running }] =
      await sql`select id::text from graphile_worker.jobs where key = 'running'`
    assert.equal(
      await unlockLostJobs(sql, ['pool-ours', 'worker-ours'], [running]),
      2,
      'the lost job and its queue',
    )
    const jobs = await sql`select key, locked_by from graphile_worker.jobs order by key`
    assert.deepEqual(
      jobs.map((j) => [j.key, j.locked_by]),
      [
        ['lost', null],
        ['running', 'pool-ours'],
        ['taking', 'pool-ours'],
        ['theirs', 'pool-theirs'],
      ],
    )
    const queues =
      await sql`select queue_name, locked_by from graphile_worker._private_job_queues order by 1`
    assert.deepEqual(
      queues.map((q) => [q.queue_name, q.locked_by]),
      [
        ['q-lost', null],
        ['q-running', 'pool-ours'],
        ['q-taking', 'pool-ours'],
        ['q-theirs', 'pool-theirs'],
      ],
    )
  } finally {
    await db.stop()
  }
})
