// An upload whose processing cannot succeed on retry (here a CHECK constraint that the test adds
// past validation) fails at once and visibly: status failed, an error naming the constraint, no
// longer pending, its job gone, and the account's next upload proceeds. Operators list, retry and
// cancel uploads through the admin API; stuck ones show in /metrics.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { isPermanent } from '../src/db/sqlstate.ts'
import { scoredAccount, waitForUpload } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let a: Awaited<ReturnType<typeof scoredAccount>>
before(async () => {
  s = await startTestService({ maxPendingUploads: 2, stuckUploadSeconds: 1 })
  a = await scoredAccount(s)
})
after(() => s.stop())

const upload = (id: string, name: string) => a.api('/api/v1/customers', { customers: [{ external_id: id, name }] })
const processJobs = async (uploadId: number) =>
  (
    await s.sql`
    select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_tasks t
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
    assert.match(failed.error, /^Processing failed and cannot succeed on retry at \/customers\/0\/name: /)
    assert.match(failed.error, /violates check constraint "no_forbidden_names" \(constraint no_forbidden_names/)
    assert.equal(await processJobs(bad.body.upload_id), 0, 'the job was removed, not left to retry for days')
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
  for (const code of ['40001', '40P01', '55P03', '08006', '57P01', '53300', 'CONNECTION_CLOSED', 'ECONNRESET']) {
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
  // The first attempt meets a serialization failure (a sequence, so the rollback does not undo
  // the count); the retry passes.
  await s.sql`create sequence flaky_attempts`
  await s.sql`
    create function flaky() returns trigger language plpgsql as $$ begin
      if new.name = 'Flaky' and nextval('flaky_attempts') = 1 then
        raise exception 'simulated serialization failure' using errcode = '40001';
      end if;
      return new;
    end $$`
  await s.sql`create trigger flaky before insert or update on customers for each row execute function flaky()`
  try {
    const res = await upload('flaky', 'Flaky')
    assert.equal(res.status, 200)
    const id = String(res.body.upload_id)
    const deadline = Date.now() + 10_000
    let job: { attempts: number; last_error: string | null } | undefined
    while (!job?.last_error && Date.now() < deadline) {
      ;[job] = await s.sql<{ attempts: number; last_error: string | null }[]>`
        select j.attempts, j.last_error from graphile_worker._private_jobs j
          join graphile_worker._private_tasks t on t.id = j.task_id
        where t.identifier = 'process_upload' and j.payload->>'upload_id' = ${id}`
      await new Promise((r) => setTimeout(r, 50))
    }
    assert.equal(job?.attempts, 1, 'the job was kept for a retry')
    assert.match(String(job?.last_error), /simulated serialization failure/)
    const between = await a.api(`/api/v1/uploads/${id}`, undefined, 'GET')
    assert.deepEqual([between.body.status, between.body.error], ['processing', null])
    const done = await waitForUpload(a.api, res.body.upload_id, 30_000)
    assert.deepEqual([done.status, done.error], ['processed', null])
    assert.equal(await processJobs(res.body.upload_id), 0)
    assert.equal((await s.sql`select nextval('flaky_attempts')::int as n`)[0].n, 3, 'two attempts ran')
  } finally {
    await s.sql`drop trigger if exists flaky on customers`
    await s.sql`drop function if exists flaky()`
    await s.sql`drop sequence if exists flaky_attempts`
  }
})

test('a processed upload cannot be retried or cancelled; an unknown one is a 404', async () => {
  const ok = await upload('ok4', 'Fine')
  await waitForUpload(a.api, ok.body.upload_id, 30_000)
  assert.equal((await s.admin('POST', `/accounts/${a.id}/uploads/${ok.body.upload_id}/retry`)).status, 409)
  assert.equal((await s.admin('POST', `/accounts/${a.id}/uploads/${ok.body.upload_id}/cancel`)).status, 409)
  assert.equal((await s.admin('POST', `/accounts/${a.id}/uploads/999999/retry`)).status, 404)
  assert.equal((await s.admin('GET', `/accounts/${a.id}/uploads?status=nope`)).status, 400)
})

test('an upload stuck behind its account queue shows in /metrics and the admin API, and can be cancelled', async () => {
  // The account's queue is held by a lock that no worker can take, so the upload waits.
  const [{ id: queue }] = await s.sql`
    select id from graphile_worker._private_job_queues where queue_name = ${`account:${a.id}`}`
  await s.sql`update graphile_worker._private_job_queues set locked_at = now(), locked_by = 'test' where id = ${queue}`
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
    const cancelled = await s.admin('POST', `/accounts/${a.id}/uploads/${waiting.body.upload_id}/cancel`)
    assert.deepEqual(cancelled.body, { upload_id: waiting.body.upload_id, status: 'failed' })
    assert.equal(await processJobs(waiting.body.upload_id), 0)
    const state = await a.api(`/api/v1/uploads/${waiting.body.upload_id}`, undefined, 'GET')
    assert.deepEqual([state.body.status, state.body.error], ['failed', 'Cancelled by an operator.'])
  } finally {
    await s.sql`update graphile_worker._private_job_queues set locked_at = null, locked_by = null where id = ${queue}`
  }
})
