import { fail } from '../http/errors.ts'
import { accountQueue } from '../jobs/enqueue.ts'
import { checkRawEvents, type TrackBody } from '../tracking/schemas.ts'
import type { App, Handler } from '../http/types.ts'

// One statement (one round trip, one transaction) checks the account, appends every event and adds
// the job that applies them: a 200 means both are committed, and a refused request stores nothing.
// The validated body goes to PostgreSQL as the text it came as (as text: a jsonb parameter would
// be JSON-encoded once more) and is unpacked there, so no event is serialized again in Node.
// Reading j's count is what makes PostgreSQL run add_job.
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
  ), j as (
    select graphile_worker.add_job('apply_events', json_build_object('account_id', ${accountId}::bigint, 'from_id', min(id)),
      queue_name => ${accountQueue(accountId)}::text)
    from e having count(*) > 0
  )
  select a.key_ok, a.set_up, (select count(*) from j)::int as jobs from a`

// JSON.parse takes nesting that PostgreSQL's parser refuses (stack depth): still the client's body.
const tooDeep = (err: { code?: string }) =>
  err?.code === '54001' ? fail(400, 'The request body is nested too deeply to be stored.') : Promise.reject(err)

// SPEC section 1: a trackerKey of another account, or an account without a tracking domain, is 403.
export const track: Handler = async (req, app) => {
  const { trackerKey, events } = req.input as TrackBody
  checkRawEvents(req.body)
  const [account] = await store(app, req.auth!.accountId, trackerKey, req.body.toString('utf8')).catch(tooDeep)
  if (!account?.key_ok) fail(403, 'The trackerKey is not the tracker key of this API key\'s account.')
  if (!account.set_up) fail(403, 'Tracking is not set up for this account: add a tracking domain first.')
  return { status: 200, body: { status: 'received', events: events.length } }
}
