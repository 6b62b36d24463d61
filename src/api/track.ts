import { fail } from '../http/errors.ts'
import { accountQueue } from '../jobs/enqueue.ts'
import { applyJobKey } from '../jobs/apply-events.ts'
import { checkRawEvents, type TrackBody } from '../tracking/schemas.ts'
import type { App, Handler } from '../http/types.ts'

// One statement (one round trip, one transaction) checks the account, appends every event and
// makes sure a job will apply them: a 200 means both are committed, and a refused request stores
// nothing. The validated body goes to PostgreSQL as the text it came as (as text: a jsonb parameter
// would be JSON-encoded once more) and is unpacked there, so no event is serialized again in Node.
//
// The job: add_job NOTIFYs, and PostgreSQL serializes the commits of notifying transactions
// (WAL flush included), which made every request wait for the one before it (measured: a quarter
// of the throughput). So a job is added only when the account has no apply job waiting; a waiting
// one applies all received events of the account, ours included, and is held with FOR KEY SHARE
// so that no worker can start it (get_job takes FOR UPDATE SKIP LOCKED) before this commits. A job
// a worker is taking (locked) or has taken (re-checked after the lock) counts as not waiting.
// This reads graphile-worker 0.17's _private_jobs (key, is_available); test/tracking.test.ts
// covers it. Reading j's count is what makes PostgreSQL run add_job.
const store = (app: App, accountId: number, trackerKey: string, body: string) => app.sql`
  with a as (
    select tracker_key = ${trackerKey} as key_ok, cardinality(tracking_domains) > 0 as set_up
    from accounts where id = ${accountId}
  ), e as (
    insert into tracking_events (account_id, name, occurred_at, customer_external_id, contact_external_id, data)
    select ${accountId}, x->>'name', to_timestamp((x->>'timestamp')::float8 / 1000),
      x#>>'{identification,customer}', x#>>'{identification,contact}', nullif(x->'data', 'null')
    from a, jsonb_array_elements((${body}::text::jsonb)->'events') x
    where a.key_ok and a.set_up
    returning id
  ), waiting as (
    select 1 from graphile_worker._private_jobs where key = ${applyJobKey(accountId)}::text and is_available for key share skip locked
  ), j as (
    select graphile_worker.add_job('apply_events', json_build_object('account_id', ${accountId}::bigint),
      queue_name => ${accountQueue(accountId)}::text, job_key => ${applyJobKey(accountId)}::text)
    where exists (select 1 from e) and not exists (select 1 from waiting)
  )
  select a.key_ok, a.set_up, (select count(*) from j)::int as jobs from a`

// Two requests that began just before a worker took the waiting job both lock its row, find it
// taken on re-check (the lock stays), and both add a job, whose add_jobs clears the taken job's key
// under each other's lock: PostgreSQL aborts one with a deadlock. The statement is all or nothing,
// so it is simply run again.
const storeRetrying = async (
  app: App, accountId: number, trackerKey: string, body: string, attempts = 3,
): Promise<Awaited<ReturnType<typeof store>>> => {
  try {
    return await store(app, accountId, trackerKey, body)
  } catch (err) {
    if ((err as { code?: string })?.code === '40P01' && attempts > 1) return storeRetrying(app, accountId, trackerKey, body, attempts - 1)
    // JSON.parse takes nesting that PostgreSQL's parser refuses (stack depth): still the client's body.
    if ((err as { code?: string })?.code === '54001') fail(400, 'The request body is nested too deeply to be stored.')
    throw err
  }
}

// SPEC section 1: a trackerKey of another account, or an account without a tracking domain, is 403.
export const track: Handler = async (req, app) => {
  const { trackerKey, events } = req.input as TrackBody
  checkRawEvents(req.body)
  const [account] = await storeRetrying(app, req.auth!.accountId, trackerKey, req.body.toString('utf8'))
  if (!account?.key_ok) fail(403, 'The trackerKey is not the tracker key of this API key\'s account.')
  if (!account.set_up) fail(403, 'Tracking is not set up for this account: add a tracking domain first.')
  return { status: 200, body: { status: 'received', events: events.length } }
}
