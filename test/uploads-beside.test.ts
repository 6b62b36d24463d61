// Two uploads of an account merged at once (src/uploads/process.ts mergeBeside): an upload's job
// merges the upload its account queue runs next beside its own, when that is an upload of the same
// kind that shares no record with it and no other queue's job runs. No worker runs: each job is run
// here, one at a time, as the worker would run it with the account queue locked.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { JobHelpers } from 'graphile-worker'
import { processReceivedUpload } from '../src/uploads/process.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let account: Awaited<ReturnType<typeof scoredAccount>>
const today = new Date().toISOString().slice(0, 10)

before(async () => {
  s = await startTestService({}, { http: true, worker: false })
  account = await scoredAccount(s)
})
after(() => s?.stop())

const upload = async (ids: string[], name = (id: string) => id, collection = 'customers') => {
  const items =
    collection === 'customers'
      ? ids.map((id) => ({
          external_id: id,
          name: name(id),
          metrics: [{ date: today, logins: ids.indexOf(id) }],
        }))
      : ids.map((id) => ({ contact_external_id: id, contact_name: id, customer_external_id: 'a1' }))
  const res = await account.api(`/api/v1/${collection}`, { [collection]: items })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.upload_id as number
}

// The upload's processing job run as the worker runs it: its own job, its first attempt.
const runJob = async (uploadId: number) => {
  const [job] = await s.sql`
    select j.id::text as id, j.attempts, j.max_attempts from graphile_worker._private_jobs j
      join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = 'process_upload' and (j.payload->>'upload_id')::bigint = ${uploadId}`
  assert.ok(job, `upload ${uploadId} has its job`)
  const helpers = { job: { ...job, attempts: job.attempts + 1 } } as unknown as JobHelpers
  const result = await processReceivedUpload(
    s.app,
    { account_id: account.id, upload_id: uploadId },
    helpers,
  )
  await s.sql`delete from graphile_worker._private_jobs where id = ${job.id}::bigint`
  return result
}

const uploadRow = async (uploadId: number) =>
  (
    await s.sql`select status, created, updated from uploads
      where account_id = ${account.id} and id = ${uploadId}`
  )[0]

const customers = async (ids: string[]) =>
  s.sql`select external_id, name, service_id::int as service_id,
      (select count(*)::int from customer_snapshots t where t.account_id = c.account_id
        and t.customer_id = c.service_id) as snapshots
    from customers c where account_id = ${account.id} and external_id = any(${ids})
    order by service_id`

test('the next upload of the same kind sharing no record is merged beside, its records created after', async () => {
  const first = await upload(['p1', 'p2', 'p3'])
  const second = await upload(['q1', 'q2'])
  const result = await runJob(first)
  assert.deepEqual(result, { upload: first, created: 3, updated: 0, ignored: 0, beside: second })
  for (const [id, created] of [
    [first, 3],
    [second, 2],
  ])
    assert.deepEqual(await uploadRow(id), { status: 'processed', created, updated: 0 })
  const stored = await customers(['p1', 'p2', 'p3', 'q1', 'q2'])
  // The first upload's records take the lower service ids, each upload's in item order.
  assert.deepEqual(
    stored.map((r) => r.external_id),
    ['p1', 'p2', 'p3', 'q1', 'q2'],
  )
  assert.ok(stored.every((r) => r.snapshots === 1))
  // Its own job then finds it processed, and merges nothing.
  assert.equal(await runJob(second), null)
})

test('an upload that shares a record with the one before is left to its own job, and wins', async () => {
  // A stored record: merged beside, the second would wait for the first's lock on it and then
  // merge, so only the check of shared ids leaves it to its own job.
  assert.deepEqual(await runJob(await upload(['r2'])), {
    upload: (await s.sql`select max(id)::int as id from uploads`)[0].id,
    created: 1,
    updated: 0,
    ignored: 0,
  })
  const first = await upload(['r1', 'r2'], (id) => `${id} first`)
  const second = await upload(['r2', 'r3'], (id) => `${id} second`)
  assert.deepEqual(await runJob(first), { upload: first, created: 1, updated: 1, ignored: 0 })
  assert.equal((await uploadRow(second)).status, 'received')
  assert.deepEqual(await runJob(second), { upload: second, created: 1, updated: 1, ignored: 0 })
  assert.deepEqual(
    (await customers(['r1', 'r2', 'r3'])).map((r) => [r.external_id, r.name]),
    [
      ['r2', 'r2 second'],
      ['r1', 'r1 first'],
      ['r3', 'r3 second'],
    ],
  )
})

test('no upload is merged beside while another queue runs a job, nor one of another kind', async () => {
  const first = await upload(['s1'])
  const second = await upload(['s2'])
  const [busy] = await s.sql`
    insert into graphile_worker._private_job_queues (queue_name, locked_at, locked_by)
    values ('another', now(), 'a worker') returning id`
  try {
    assert.deepEqual(await runJob(first), { upload: first, created: 1, updated: 0, ignored: 0 })
  } finally {
    await s.sql`delete from graphile_worker._private_job_queues where id = ${busy.id}`
  }
  assert.equal((await uploadRow(second)).status, 'received')
  const contacts = await upload(['t1'], undefined, 'contacts')
  assert.deepEqual(await runJob(second), { upload: second, created: 1, updated: 0, ignored: 0 })
  assert.equal((await uploadRow(contacts)).status, 'received')
  assert.deepEqual(await runJob(contacts), { upload: contacts, created: 0, updated: 0, ignored: 1 })
})

test('a failure of either leaves the other as merging them one after the other would', async () => {
  // Past validation, as test/upload-failures.test.ts does: a name the table refuses.
  await s.sql`alter table customers add constraint no_refused_name check (name <> 'refused')`
  try {
    const failing = await upload(['u1'], () => 'refused')
    const after = await upload(['u2'])
    const failed = await runJob(failing)
    assert.equal(failed && 'failed' in failed, true, JSON.stringify(failed))
    assert.equal((await uploadRow(failing)).status, 'failed')
    assert.equal((await uploadRow(after)).status, 'received')
    assert.deepEqual(await runJob(after), { upload: after, created: 1, updated: 0, ignored: 0 })
    const before = await upload(['v1'])
    const refused = await upload(['v2'], () => 'refused')
    assert.deepEqual(await runJob(before), { upload: before, created: 1, updated: 0, ignored: 0 })
    assert.equal((await uploadRow(refused)).status, 'received')
    const own = await runJob(refused)
    assert.equal(own && 'failed' in own, true, JSON.stringify(own))
    assert.deepEqual(
      (await customers(['u1', 'u2', 'v1', 'v2'])).map((r) => r.external_id),
      ['u2', 'v1'],
    )
  } finally {
    await s.sql`alter table customers drop constraint no_refused_name`
  }
})
