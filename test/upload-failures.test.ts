// An upload whose processing cannot succeed on retry (here a CHECK constraint that the test adds
// past validation) fails at once and visibly: status failed, an error naming the constraint, no
// longer pending, its job gone, and the account's next upload proceeds. Operators list, retry and
// cancel uploads through the admin API; stuck ones show in /metrics.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { isPermanent } from '../src/db/sqlstate.ts'
import { lockTable } from './helpers/db.ts'
import { scoredAccount, waitForUpload } from './helpers/fixtures.ts'
import { eventually } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let a: Awaited<ReturnType<typeof scoredAccount>>
before(async () => {
  s = await startTestService({ maxPendingUploads: 2, stuckUploadSeconds: 1 })
  a = await scoredAccount(s)
})
after(() => s.stop())

const upload = (id: string, name: string) =>
  a.api('/api/v1/customers', { customers: [{ external_id: id, name }] })
const processJobs = async (uploadId: number) =>
  (
    await s.sql`
    select count(*)::int as n from graphile_worker._private_jobs j
      join graphile_worker._private_tasks t
      on t.id = j.task_id
    where t.identifier = 'process_upload' and j.payload->>'upload_id' = ${String(uploadId)}`
  )[0].n

test('a permanent failure fails the upload at once, and the next upload proceeds', async () => {
  await s.sql`alter table customers add constraint no_forbidden_names check (name <> 'Forbidden')`
  try {
    const bad = await upload('bad', 'Forbidden')
    assert.equal(bad.status, 200)
    const failed = await waitForUpload(a.api, bad.body.upload_id, 30_000)
    assert.equal(failed.status, 'failed')
    assert.match(failed.error, /cannot succeed on retry/)
    assert.match(
      failed.error,
      /^Processing failed and cannot succeed on retry at \/customers\/0\/name: /,
    )
    assert.match(
      failed.error,
      /violates check constraint "no_forbidden_names" \(constraint no_forbidden_names/,
    )
    // The upload is marked failed in its own commit, and graphile-worker then completes the job.
    await eventually(
      async () => (await processJobs(bad.body.upload_id)) === 0,
      'the job removed, not left to retry for days',
      10_000,
    )
    // No longer pending: with a limit of 2, three further uploads go through one after another.
    for (const id of ['ok1', 'ok2', 'ok3']) {
      const ok = await upload(id, `Fine ${id}`)
      assert.equal(ok.status, 200, JSON.stringify(ok.body))
      assert.equal((await waitForUpload(a.api, ok.body.upload_id, 30_000)).status, 'processed')
    }
    const listed = await s.admin('GET', `/accounts/${a.id}/uploads?status=failed`)
    assert.deepEqual(
      listed.body.map((u: { upload_id: number }) => u.upload_id),
      [bad.body.upload_id],
    )
    // Retried once the cause is gone, it is processed.
    await s.sql`alter table customers drop constraint no_forbidden_names`
    const retried = await s.admin('POST', `/accounts/${a.id}/uploads/${bad.body.upload_id}/retry`)
    assert.equal(retried.status, 202, JSON.stringify(retried.body))
    assert.equal((await waitForUpload(a.api, bad.body.upload_id, 30_000)).status, 'processed')
    assert.equal((await a.api('/api/v1/customer/bad', undefined, 'GET')).body.name, 'Forbidden')
  } finally {
    await s.sql`alter table customers drop constraint if exists no_forbidden_names`
  }
})

test('errors are permanent (classes 22 and 23) or retried; race-prone integrity errors after 3 attempts', () => {
  const e = (code: string) => Object.assign(new Error(code), { code })
  for (const code of ['22007', '22001', '22P02', '23514', '23502']) {
    assert.ok(isPermanent(e(code)), code)
  }
  for (const code of [
    '40001',
    '40P01',
    '55P03',
    '08006',
    '57P01',
    '53300',
    'CONNECTION_CLOSED',
    'ECONNRESET',
  ]) {
    assert.ok(!isPermanent(e(code), 25), code)
  }
  for (const code of ['23505', '23503']) {
    assert.deepEqual(
      [1, 2, 3].map((attempt) => isPermanent(e(code), attempt)),
      [false, false, true],
      code,
    )
  }
  assert.ok(!isPermanent(new TypeError('a bug')))
})

test('a transient error is retried with backoff, not failed, and the upload is then processed', async () => {
  // The first attempt waits on a lock the test holds and is cancelled there (57014, as a statement
  // timeout or an operator's cancel ends it); the retry, once the lock is gone, passes. (A trigger
  // that failed the first attempt counted attempts in a sequence: on Citus the trigger runs on the
  // shard's node, the sequence is the coordinator's.) The earlier uploads' jobs (their scoring) are
  // done first, so that the upload's is the one waiting.
  await eventually(
    async () =>
      (await s.sql`select count(*)::int as n from graphile_worker._private_jobs`)[0].n === 0,
    'the earlier jobs',
  )
  const unlock = await lockTable(s.sql, 'customers')
  let released = false
  try {
    const res = await upload('flaky', 'Flaky')
    assert.equal(res.status, 200)
    const id = String(res.body.upload_id)
    await eventually(async () => {
      const [{ n }] = await s.sql`select count(*)::int as n from pg_locks
        where relation = 'customers'::regclass and not granted`
      return n > 0
    }, 'the upload to wait on the lock')
    const [{ cancelled }] = await s.app
      .admin`select count(pg_cancel_backend(pid))::int as cancelled from pg_locks
      where relation = 'customers'::regclass and not granted`
    assert.equal(cancelled, 1)
    const job = await eventually(async () => {
      const [found] = await s.sql<{ attempts: number; last_error: string | null }[]>`
        select j.attempts, j.last_error from graphile_worker._private_jobs j
          join graphile_worker._private_tasks t on t.id = j.task_id
        where t.identifier = 'process_upload' and j.payload->>'upload_id' = ${id}`
      return found?.last_error && found
    }, 'the failed attempt')
    assert.equal(job.attempts, 1, 'the job was kept for a retry')
    assert.match(job.last_error!, /canceling statement due to user request/)
    const between = await a.api(`/api/v1/uploads/${id}`, undefined, 'GET')
    assert.deepEqual([between.body.status, between.body.error], ['processing', null])
    await unlock()
    released = true
    const done = await waitForUpload(a.api, res.body.upload_id, 30_000)
    assert.deepEqual([done.status, done.error], ['processed', null])
    assert.equal(await processJobs(res.body.upload_id), 0)
  } finally {
    if (!released) await unlock()
  }
})

test('a processed upload cannot be retried or cancelled; an unknown one is a 404', async () => {
  const ok = await upload('ok4', 'Fine')
  await waitForUpload(a.api, ok.body.upload_id, 30_000)
  assert.equal(
    (await s.admin('POST', `/accounts/${a.id}/uploads/${ok.body.upload_id}/retry`)).status,
    409,
  )
  assert.equal(
    (await s.admin('POST', `/accounts/${a.id}/uploads/${ok.body.upload_id}/cancel`)).status,
    409,
  )
  assert.equal((await s.admin('POST', `/accounts/${a.id}/uploads/999999/retry`)).status, 404)
  assert.equal((await s.admin('GET', `/accounts/${a.id}/uploads?status=nope`)).status, 400)
})

test('an upload stuck behind its account queue shows in /metrics and the admin API, and can be cancelled', async () => {
  // The account's queue is held by a lock that no worker can take, so the upload waits.
  const [{ id: queue }] = await s.sql`
    select id from graphile_worker._private_job_queues where queue_name = ${`account:${a.id}`}`
  await s.sql`update graphile_worker._private_job_queues set locked_at = now(), locked_by = 'test'
    where id = ${queue}`
  try {
    const waiting = await upload('stuck', 'Stuck')
    assert.equal(waiting.status, 200)
    await new Promise((r) => setTimeout(r, 1500))
    const stuck = await s.admin('GET', `/accounts/${a.id}/uploads?stuck=true`)
    assert.deepEqual(
      stuck.body.map((u: { upload_id: number }) => u.upload_id),
      [waiting.body.upload_id],
    )
    const metrics = await (await fetch(`${s.base}/metrics`)).text()
    assert.match(metrics, /service_uploads_stuck\{status="received"\} 1/)
    const cancelled = await s.admin(
      'POST',
      `/accounts/${a.id}/uploads/${waiting.body.upload_id}/cancel`,
    )
    assert.deepEqual(cancelled.body, { upload_id: waiting.body.upload_id, status: 'failed' })
    assert.equal(await processJobs(waiting.body.upload_id), 0)
    const state = await a.api(`/api/v1/uploads/${waiting.body.upload_id}`, undefined, 'GET')
    assert.deepEqual([state.body.status, state.body.error], ['failed', 'Cancelled by an operator.'])
  } finally {
    await s.sql`update graphile_worker._private_job_queues set locked_at = null, locked_by = null
      where id = ${queue}`
  }
})
