// Every connection names its role as application_name (docs/operations.md, "Database roles"):
// service-api serves service-key requests, service-admin the admin routes and /metrics,
// service-worker the jobs (graphile-worker's own pool too). SERVICE_DATABASE_API_OPTIONS
// reaches the api pools only.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Sql } from '../src/db/client.ts'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'

// A setting of a class PostgreSQL leaves to extensions: a placeholder on a plain server,
// in force on Citus.
const API_OPTION = 'citus.multi_task_query_log_level'

let s: TestService
let observer: Sql
before(async () => {
  s = await startTestService({ databaseApiOptions: { [API_OPTION]: 'error' } })
  observer = connect(s.url, { max: 1 })
})
after(async () => {
  await observer?.end()
  await s?.stop()
})

// The other sessions of the service's database: who they are and the last statement each ran.
const sessions = async () =>
  (await observer`
    select application_name as name, query from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid()
      and backend_type = 'client backend'`) as unknown as {
    name: string
    query: string
  }[]

// The names of the sessions whose last statement matches.
const ranBy = async (pattern: RegExp) => [
  ...new Set((await sessions()).filter((r) => pattern.test(r.query)).map((r) => r.name)),
]

test('service-key requests, admin requests, /metrics and jobs run on connections named for their role', async () => {
  const acme = await scoredAccount(s, 'Roles')
  // A service-key request (the upload's intake, then its reads) and the jobs that merge
  // and score it.
  const done = await uploadAndWait(acme.api, 'customers', [{ external_id: 'c1', name: 'One' }], {
    scored: true,
  })
  // Read again, alone, until a session shows it last: on a loaded machine the reads of the polls
  // can be followed by other statements of the same connections before the observer looks.
  const uploadRead = /from uploads u where u.account_id = \$1 and u.id = \$2/
  for (let tries = 0; tries < 5 && (await ranBy(uploadRead)).length === 0; tries++)
    assert.equal(
      (await acme.api(`/api/v1/uploads/${done.upload_id}`, undefined, 'GET')).status,
      200,
    )
  assert.deepEqual(await ranBy(uploadRead), ['service-api'])
  // graphile-worker's pool, which fetches the jobs, and the jobs' own statements.
  assert.deepEqual(await ranBy(/locked_by = \$1::text/), ['service-worker'])
  const jobCode = (await sessions()).filter(
    (r) =>
      r.name === 'service-worker' &&
      !/graphile_worker|_private_|locked_by|worker_heartbeats/.test(r.query),
  )
  assert.ok(jobCode.length > 0, 'a job ran its statements on a service-worker connection')

  const metrics = await s.call('GET', '/metrics')
  assert.equal(metrics.status, 200)
  assert.deepEqual(await ranBy(/from webhook_deliveries group by status/), ['service-admin'])

  const listed = await s.admin('GET', '/accounts')
  assert.equal(listed.status, 200)
  assert.deepEqual(await ranBy(/from accounts order by id/), ['service-admin'])

  assert.deepEqual(
    [...new Set((await sessions()).map((r) => r.name))].sort(),
    ['service-admin', 'service-api', 'service-worker'],
    'no session of the service is left unnamed',
  )
})

test('SERVICE_DATABASE_API_OPTIONS is set on the api pools only', async () => {
  const setting = async (sql: Sql) =>
    (
      await sql`select current_setting(${API_OPTION}, true) as v,
        current_setting('application_name') as name`
    )[0]
  assert.deepEqual({ ...(await setting(s.app.sql)) }, { v: 'error', name: 'service-api' })
  assert.deepEqual({ ...(await setting(s.app.heavy)) }, { v: 'error', name: 'service-api' })
  const admin = await setting(s.app.admin)
  assert.equal(admin.name, 'service-admin')
  assert.ok(admin.v === null || admin.v === '', `the admin pool has no ${API_OPTION}: ${admin.v}`)
})
