// The worker logs one JSON line per job: at info when it completes (task, job id, attempt, ms,
// outcome and what it counted), at warn with the error when it fails and will be retried; and one
// line when it stops, naming the signal.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import postgres from 'postgres'
import { freshDatabase } from './helpers/db.ts'
import { startProcess } from './helpers/process.ts'

const lines = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))

test('one log line per job, completed and failed', async () => {
  const db = await freshDatabase()
  const worker = await startProcess(['worker'], db.url, { LOG_LEVEL: 'info' })
  const sql = postgres(db.url, { max: 1, onnotice: () => {} })
  try {
    // Running once it has written its first heartbeat (after every migration).
    const beating = async () =>
      (await sql`select to_regclass('worker_heartbeats') is not null as t`)[0].t &&
      (await sql`select count(*)::int as n from worker_heartbeats`)[0].n > 0
    for (let i = 0; !(await beating()); i++) {
      assert.ok(i < 300, 'the worker never started')
      await new Promise((r) => setTimeout(r, 100))
    }
    // A scoring job of an account with no records completes, counting nothing; one whose payload
    // names no valid account fails in SQL and is retried.
    await sql`select graphile_worker.add_job('score_records',
      '{"account_id": 1, "entity": "customer", "ids": []}'::json)`
    await sql`select graphile_worker.add_job('score_records',
      '{"account_id": "x", "entity": "customer"}'::json,
      max_attempts => 2)`
    const deadline = Date.now() + 30_000
    const jobs = () => lines(worker.stderr()).filter((l) => l.msg === 'job')
    while (
      !(
        jobs().some((l) => l.outcome === 'completed') &&
        jobs().some((l) => l.outcome === 'retrying')
      )
    ) {
      assert.ok(Date.now() < deadline, `no job lines in:\n${worker.stderr()}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    const done = jobs().find((l) => l.outcome === 'completed')
    assert.equal(done.level, 'info')
    assert.equal(done.task, 'score_records')
    assert.equal(typeof done.job, 'string')
    assert.equal(done.attempt, 1)
    assert.equal(typeof done.ms, 'number')
    assert.deepEqual(done.counts, { entity: 'customer', scored: 0 })
    const failed = jobs().find((l) => l.outcome === 'retrying')
    assert.equal(failed.level, 'warn')
    assert.match(failed.error, /bigint|invalid input/)
  } finally {
    await sql.end()
    await worker.kill('SIGTERM')
    await db.drop()
  }
  // It says when it stops, and why.
  const stopped = lines(worker.stderr()).filter((l) => l.msg === 'stopped')
  assert.equal(stopped.length, 1, worker.stderr())
  assert.equal(stopped[0].reason, 'SIGTERM')
  assert.equal(stopped[0].command, 'worker')
})
