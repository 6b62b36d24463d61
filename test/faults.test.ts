import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startEmbedded } from '../src/db/embedded.ts'
import { connect } from '../src/db/client.ts'
import { freshDatabase } from './helpers/db.ts'
import { ADMIN_TOKEN } from './helpers/service.ts'
import { startProcess } from './helpers/process.ts'
import { freePort } from './helpers/cluster.ts'

const json = (token: string) => ({ 'service-key': token, 'content-type': 'application/json' })
const admin = (base: string, method: string, path: string, body?: unknown) =>
  fetch(`${base}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => undefined) }))

const setupAccount = async (base: string) => {
  const account = (await admin(base, 'POST', '/accounts', { name: 'Faults' })).body
  await admin(base, 'POST', `/accounts/${account.id}/properties`, {
    entity: 'customer',
    kind: 'metric',
    codename: 'logins',
    type: 'number',
  })
  await admin(base, 'PUT', `/accounts/${account.id}/scoring`, {
    customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 10 }] },
  })
  return {
    id: account.id as number,
    token: (await admin(base, 'POST', `/accounts/${account.id}/keys`, {})).body.token as string,
  }
}

test('SIGKILL of a serve process under load: every 200 is stored, nothing is half-stored', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  const serve = await startProcess(['serve', '--no-worker'], db.url, {
    SERVICE_API_RATE_LIMIT: '1000000',
    SERVICE_MAX_PENDING_UPLOADS: '100000',
  })
  try {
    const { token } = await setupAccount(serve.base)
    const acked: { kind: 'upload' | 'create'; id: string | number; items: number }[] = []
    let sent = 0
    const client = async (n: number) => {
      for (let i = 0; ; i++) {
        const k = `${n}-${i}`
        sent++
        try {
          if (i % 2) {
            const res = await fetch(`${serve.base}/api/v1/customer`, {
              method: 'POST',
              headers: json(token),
              body: JSON.stringify({
                external_id: `one-${k}`,
                name: k,
                metrics: [{ date: '2026-01-01', logins: 3 }],
              }),
            })
            if (res.status === 201) acked.push({ kind: 'create', id: `one-${k}`, items: 1 })
          } else {
            const customers = Array.from({ length: 50 }, (_, j) => ({
              external_id: `bulk-${k}-${j}`,
              name: 'b',
              metrics: [{ date: '2026-01-01', logins: j }],
            }))
            const res = await fetch(`${serve.base}/api/v1/customers`, {
              method: 'POST',
              headers: json(token),
              body: JSON.stringify({ customers }),
            })
            if (res.status === 200)
              acked.push({ kind: 'upload', id: (await res.json()).upload_id, items: 50 })
          }
        } catch {
          return
        } // the server is gone
      }
    }
    const clients = Promise.all(Array.from({ length: 6 }, (_, n) => client(n)))
    while (acked.length < 40) await new Promise((r) => setTimeout(r, 10))
    await serve.kill('SIGKILL')
    await clients
    assert.ok(sent > acked.length, 'some requests were in flight when the process died')
    for (const a of acked.filter((x) => x.kind === 'create')) {
      const [row] = await sql`select (select count(*)::int from customer_snapshots s
        where s.account_id = c.account_id and s.customer_id = c.service_id) as snaps
        from customers c where external_id = ${a.id}`
      assert.ok(row, `acknowledged customer ${a.id} is missing`)
      assert.equal(row.snaps, 1, `customer ${a.id} is half-stored`)
    }
    const uploads =
      await sql`select id, item_count, jsonb_array_length(items) as stored, status from uploads`
    for (const a of acked.filter((x) => x.kind === 'upload')) {
      const u = uploads.find((r) => r.id === a.id)
      assert.ok(u, `acknowledged upload ${a.id} is missing`)
      assert.equal(u.stored, a.items)
    }
    // Every stored bulk upload has its processing job (single creates were processed inline): a
    // worker started now processes them all.
    const bulk = uploads.filter((u) => u.status === 'received')
    const [{ jobs }] = await sql`select count(*)::int as jobs from graphile_worker.jobs
        where task_identifier = 'process_upload'`
    assert.equal(jobs, bulk.length)
    const worker = await startProcess(['worker'], db.url)
    try {
      for (let i = 0; i < 600; i++) {
        const [{ n }] =
          await sql`select count(*)::int as n from uploads where status <> 'processed'`
        if (n === 0) break
        await new Promise((r) => setTimeout(r, 100))
      }
      const [{ n, customers }] =
        await sql`select (select count(*)::int from uploads where status <> 'processed') as n,
        (select count(*)::int from customers where external_id like 'bulk-%') as customers`
      assert.equal(n, 0)
      assert.equal(customers, bulk.length * 50)
    } finally {
      await worker.kill('SIGTERM')
    }
  } finally {
    serve.child.kill('SIGKILL')
    await sql.end()
    await db.drop()
  }
})

const pgRestartTitle =
  'a PostgreSQL restart during traffic: readiness goes false then true, requests fail cleanly, nothing crashes'
test(pgRestartTitle, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'service-fault-pg-'))
  chmodSync(dir, 0o755)
  const port = await freePort()
  let pg = await startEmbedded(join(dir, 'pg'), port)
  // Its own process, so that "nothing crashes" means the process is still there at the end.
  const serve = await startProcess(['serve'], pg.url, {
    SERVICE_API_RATE_LIMIT: '1000000',
    SERVICE_JOB_LOCK_TIMEOUT: '3',
  })
  const base = serve.base
  try {
    const { token } = await setupAccount(base)
    const statuses = new Map<number, number>()
    let running = true
    const traffic = (async () => {
      while (running) {
        const res = await fetch(`${base}/api/v1/customers`, {
          method: 'POST',
          headers: json(token),
          body: JSON.stringify({ customers: [{ external_id: `x${Math.random()}`, name: 'x' }] }),
        })
        const body = await res.json().catch(() => ({}))
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
        if (res.status >= 500) {
          assert.equal(res.status, 503)
          assert.equal(body.status, 503)
        }
        await new Promise((r) => setTimeout(r, 5))
      }
    })()
    await new Promise((r) => setTimeout(r, 300))
    await pg.stop()
    // /readyz polled until it answers `status` (or the tries run out), which must happen.
    const readiness = async (status: number, tries: number) => {
      let ready = await fetch(`${base}/readyz`)
      for (let i = 1; i < tries && ready.status !== status; i++) {
        await new Promise((r) => setTimeout(r, 50))
        ready = await fetch(`${base}/readyz`)
      }
      assert.equal(ready.status, status)
    }
    await readiness(503, 100)
    await new Promise((r) => setTimeout(r, 500))
    pg = await startEmbedded(join(dir, 'pg'), port)
    await readiness(200, 200)
    await new Promise((r) => setTimeout(r, 500))
    running = false
    await traffic
    assert.ok((statuses.get(503) ?? 0) > 0, 'requests during the outage answered 503')
    // 429 is backpressure: uploads pile up while the jobs locked at the outage wait for release.
    assert.deepEqual(
      [...statuses.keys()].filter((s) => ![200, 429, 503].includes(s)),
      [],
    )
    // The worker reconnects too: every upload acknowledged before, during or after gets processed.
    const sql = connect(pg.url)
    try {
      let pending = -1
      for (let i = 0; i < 600 && pending !== 0; i++) {
        ;[{ pending }] =
          await sql`select count(*)::int as pending from uploads where status <> 'processed'`
        if (pending) await new Promise((r) => setTimeout(r, 100))
      }
      const jobs =
        pending &&
        (await sql`select task_identifier, locked_by, locked_at, attempts, last_error,
          run_at > now() as later,
          (select locked_by from graphile_worker._private_job_queues q where q.id = j.job_queue_id)
            as queue_lock
          from graphile_worker._private_jobs j limit 5`)
      assert.equal(
        pending,
        0,
        `uploads left unprocessed after the restart: ${JSON.stringify(jobs)}`,
      )
    } finally {
      await sql.end()
    }
    const after = await fetch(`${base}/api/v1/customers`, {
      method: 'POST',
      headers: json(token),
      body: JSON.stringify({ customers: [{ external_id: 'after', name: 'x' }] }),
    })
    assert.equal(after.status, 200, 'requests succeed again once the backlog has drained')
    assert.equal(serve.child.exitCode, null, `the service process died: ${serve.stderr()}`)
    assert.equal(await serve.kill('SIGTERM'), 0, 'and it still drains and exits 0')
  } finally {
    serve.child.kill('SIGKILL')
    await pg.stop()
    rmSync(dir, { recursive: true, force: true })
  }
})
