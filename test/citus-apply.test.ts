// Citus only (test/run.ts runs it in the Citus pass): the per-account jobs that stage rows in
// coordinator tables (the tracker's and Segment's apply jobs, an erasure) run on the account's
// shard alone. They run on `service-worker` connections, which the pass lets fan out; here
// every statement runs with citus.multi_task_query_log_level = error, so one that touches
// another shard fails.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { connect } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { erase } from '../src/privacy/erase.ts'
import { applyEvents } from '../src/tracking/apply.ts'
import { applyRelay } from '../src/tracking/relay/apply.ts'
import { freshDatabase } from './helpers/db.ts'

test('the apply jobs and an erasure touch only the account’s shard, and do their work', async () => {
  const db = await freshDatabase()
  const setup = connect(db.url)
  const sql = connect(db.url, {
    role: 'worker',
    parameters: { 'citus.multi_task_query_log_level': 'error' },
  })
  try {
    await migrate(setup, db.url)
    const [{ id }] =
      await setup`insert into accounts (name, tracker_key) values ('a', 'k') returning id`
    await setup`insert into accounts (name, tracker_key) values ('b', 'k2')`
    await setup`insert into property_defs (account_id, entity, kind, codename, type, name)
      values (${id}, 'customer', 'attribute', 'plan', 'string', 'Plan')`
    await setup`insert into customers (account_id, external_id) values (${id}, 'c1')`
    await setup`insert into suppressions (account_id, entity, hash)
      values (${id}, 'contact', sha256(convert_to('gone', 'UTF8')))`

    // The tracker's events: data applied, a contact created, a suppressed one dropped, an unknown
    // customer's event kept unmatched, a Segment track counted.
    await setup`
      insert into tracking_events (account_id, name, occurred_at, customer_external_id,
        contact_external_id, data,
        message_id)
      values (${id}, 'login', now(), 'c1', 'p1',
        '{"contact": {"contact_name": "Pat"}, "customer": {"plan": "x"}}',
          null),
        (${id}, 'login', now(), 'c1', 'gone', null, null),
        (${id}, 'login', now(), 'zz', null, null, null),
        (${id}, 'login', now(), 'c1', 'p2', null, 'm1')`
    const events = await sql.begin((tx) => applyEvents(tx, id))
    assert.deepEqual(events, {
      events: 4,
      suppressed: 1,
      segment: { tracks: 1, suppressed: 0, duplicates: 0 },
      customers: 1,
      contactsCreated: 2,
      contacts: 1,
    })
    const statuses = await setup`select customer_external_id as c, contact_external_id as t, status
      from tracking_events where account_id = ${id} order by id`
    assert.deepEqual(
      statuses.map((r) => [r.c, r.t, r.status]),
      [
        ['c1', 'p1', 'applied'],
        ['zz', null, 'unmatched'],
        ['c1', 'p2', 'applied'],
      ],
    )
    const [c1] =
      await setup`select attributes from customers where account_id = ${id} and external_id = 'c1'`
    assert.deepEqual(c1.attributes, { plan: 'x' })

    // Segment: a group creates its customer, an identify names its contact, one of an unknown user
    // waits, a suppressed one is dropped, a track is stored as an applied event.
    await setup`
      insert into segment_messages (account_id, message_id, type, user_id, group_id, event,
        occurred_at, traits)
      values (${id}, 'g1', 'group', 'u1', 'g', null, now(), '{"name": "G", "plan": "p"}'),
        (${id}, 'i1', 'identify', 'u1', null, null, now(), '{"name": "U"}'),
        (${id}, 'i2', 'identify', 'u9', null, null, now(), '{"name": "Nine"}'),
        (${id}, 'i3', 'identify', 'gone', null, null, now(), '{"name": "Gone"}'),
        (${id}, 't1', 'track', 'u1', null, 'ev', now(), null)`
    const segment = await sql.begin((tx) => applyRelay(tx, id))
    const outcomes = (
      segment.outcomes as { type: string; status: string; reason: string | null; n: number }[]
    )
      .map((o) => `${o.type} ${o.status} ${o.reason ?? ''}`.trim())
      .sort()
    assert.deepEqual(outcomes, [
      'group applied',
      'identify applied',
      'identify dropped suppressed',
      'identify pending',
      'track applied',
    ])
    const [u1] =
      await setup`select t.name, c.external_id as customer, c.name as customer_name from contacts t
      join customers c on c.account_id = t.account_id and c.service_id = t.customer_id
      where t.account_id = ${id} and t.external_id = 'u1'`
    assert.deepEqual({ ...u1 }, { name: 'U', customer: 'g', customer_name: 'G' })

    // Erasing customer g takes its contact u1 and their event.
    const [{ id: erasure }] =
      await setup`insert into erasures (account_id, requested) values (${id}, '{}') returning id`
    await setup`insert into erasure_targets (account_id, erasure_id, customer_external_id)
      values (${id}, ${erasure}, 'g')`
    const counts = (await sql.begin((tx) => erase(tx, id, erasure))) as Record<string, number>
    assert.deepEqual(
      [counts.customers, counts.contacts, counts.tracking_events, counts.suppressions],
      [1, 1, 1, 2],
    )
    const [{ left }] = await setup`select count(*)::int as left from tracking_events
      where account_id = ${id} and customer_external_id = 'g'`
    assert.equal(left, 0)
  } finally {
    await sql.end()
    await setup.end()
    await db.drop()
  }
})
