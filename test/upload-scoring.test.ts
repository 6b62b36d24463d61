// The scoring of processed uploads (src/db/jobs.ts scoreUploadsJob): one job per account and
// entity that each processed upload joins, run at once after a lone upload, deferred while more
// uploads of the same kind wait to be merged (so a long import's merges are not slowed by its
// scoring), brought forward when the last of them is merged or fails, and never later than the
// deferral's bound. No worker runs: the uploads are merged and scored here, one step at a time.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { SCORING_DEFERRAL_MS } from '../src/db/jobs.ts'
import { scoreUploadsTask } from '../src/scoring/batch.ts'
import { cancelUpload } from '../src/uploads/manage.ts'
import { processUpload } from '../src/uploads/process.ts'
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

const upload = async (ids: string[], collection = 'customers') => {
  const items =
    collection === 'customers'
      ? ids.map((id) => ({ external_id: id, name: id, metrics: [{ date: today, logins: 40 }] }))
      : ids.map((id) => ({ contact_external_id: id, contact_name: id, customer_external_id: 'a1' }))
  const res = await account.api(`/api/v1/${collection}`, { [collection]: items })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.upload_id as number
}
const merge = (uploadId: number) => s.sql.begin((tx) => processUpload(tx, account.id, uploadId))

// The account's waiting scoring job of an entity: the uploads it holds, and when it runs.
const job = async (entity = 'customer') => {
  const rows = await s.sql`
    select j.payload, extract(epoch from j.run_at - now())::float8 as due_in
    from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = 'score_uploads' and j.key = ${`score_uploads:${account.id}:${entity}`}`
  assert.equal(rows.length, 1, `one scoring job of the ${entity}s`)
  const [{ payload, due_in }] = rows
  return { uploads: (payload as { upload_id: number }[]).map((p) => p.upload_id), dueIn: due_in }
}
const runJob = async (entity = 'customer') => {
  const [row] = await s.sql`
    delete from graphile_worker._private_jobs j using graphile_worker._private_tasks t
    where t.id = j.task_id and t.identifier = 'score_uploads'
      and j.key = ${`score_uploads:${account.id}:${entity}`}
    returning j.payload`
  return scoreUploadsTask(s.app, row.payload)
}
const scoredAt = async (uploadId: number) =>
  (
    await s.sql`select scored_at, record_ids from uploads where account_id = ${account.id}
      and id = ${uploadId}`
  )[0]

test('a lone upload is scored at once; uploads merged while more wait are scored together after the last', async () => {
  const lone = await upload(['a1', 'a2'])
  await merge(lone)
  const alone = await job()
  assert.deepEqual(alone.uploads, [lone])
  assert.ok(alone.dueIn <= 0, `due now, not in ${alone.dueIn} s`)
  assert.deepEqual((await scoredAt(lone)).record_ids.length, 2)
  await runJob()
  const first = await upload(['b1', 'b2'])
  const second = await upload(['b2', 'b3'])
  await merge(first)
  const waiting = await job()
  assert.deepEqual(waiting.uploads, [first])
  // Deferred, within its bound.
  const bound = SCORING_DEFERRAL_MS / 1000
  assert.ok(waiting.dueIn > bound - 10 && waiting.dueIn <= bound, `due in ${waiting.dueIn} s`)
  await merge(second)
  const both = await job()
  assert.deepEqual(both.uploads, [first, second])
  assert.ok(both.dueIn <= 0, `due now once the last is merged, not in ${both.dueIn} s`)
  for (const id of [first, second]) assert.equal((await scoredAt(id)).scored_at, null)
  assert.deepEqual(await runJob(), { entity: 'customer', uploads: 2, scored: 3 })
  for (const id of [first, second]) {
    const row = await scoredAt(id)
    assert.ok(row.scored_at, `upload ${id} scored`)
    assert.equal(row.record_ids, null)
  }
  const scores = await s.sql`
    select external_id, engagementscore from customer_scores where account_id = ${account.id}
    order by external_id`
  assert.deepEqual(
    scores.map((r) => [r.external_id, r.engagementscore]),
    ['a1', 'a2', 'b1', 'b2', 'b3'].map((id) => [id, 100]),
  )
})

test('an upload of another kind never defers, and a failed one waited for brings the scoring forward', async () => {
  const customers = await upload(['c1'])
  await upload(['p1'], 'contacts')
  await merge(customers)
  const notDeferred = await job()
  assert.ok(
    notDeferred.dueIn <= 0,
    `a waiting contact upload deferred it by ${notDeferred.dueIn} s`,
  )
  await runJob()
  const first = await upload(['d1'])
  const waitedFor = await upload(['d2'])
  await merge(first)
  assert.ok((await job()).dueIn > 0)
  await cancelUpload(s.sql, account.id, waitedFor, 3600)
  const forward = await job()
  assert.deepEqual(forward.uploads, [first])
  assert.ok(
    forward.dueIn <= 0,
    `due now once the upload waited for failed, not in ${forward.dueIn} s`,
  )
  await runJob()
  assert.ok((await scoredAt(first)).scored_at)
})
