// The apply job on a mixed batch, straight against the database: several events per record in any
// order, unknown customers, new contacts, contacts of another customer, data with customer and
// contact parts, wrong types, nulls. The expected values are what the per-statement apply of
// 4d2eb6e produced on the same events; the set-based apply must give the very same, also when a
// batch dies half-way and is retried, and must never step past an event whose insert is not yet
// committed.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { Sql } from '../src/db/client.ts'
import { applyEvents } from '../src/tracking/apply.ts'
import { receiveRelay } from '../src/tracking/relay/intake.ts'
import { applyRelay } from '../src/tracking/relay/apply.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService({}, { http: false, worker: false })
})
after(() => s.stop())

const T = Date.UTC(2026, 5, 15, 12)

const newAccount = async () => {
  const [{ id }] = await s.sql`insert into accounts (name, tracker_key)
    values ('Apply', ${`CS-${randomBytes(6).toString('hex')}`}) returning id`
  await s.sql`insert into property_defs (account_id, entity, codename, kind, type) values
    (${id}, 'customer', 'country', 'attribute', 'string'),
    (${id}, 'customer', 'has_sso', 'attribute', 'boolean'),
    (${id}, 'customer', 'plan_started', 'attribute', 'date'),
    (${id}, 'customer', 'logins', 'metric', 'number'),
    (${id}, 'contact', 'role', 'attribute', 'string')`
  await s.sql`insert into customers (account_id, external_id, name, attributes) values
    (${id}, 'c1', 'One', '{}'), (${id}, 'c2', 'Two', '{"has_sso": true, "country": "SE"}'),
    (${id}, 'c3', 'Three', '{}')`
  await s.sql`insert into contacts (account_id, external_id, customer_id, name, attributes)
    select ${id}, x.external_id, c.service_id, x.name, x.attributes::jsonb
    from (values ('p1', 'c1', 'Pia', '{"role": "user"}'),
      ('q1', 'c2', 'Quinn', '{"role": "viewer"}'))
      x(external_id, customer, name, attributes)
      join customers c on c.account_id = ${id} and c.external_id = x.customer`
  return id as number
}

interface Event {
  name?: string
  at: number
  customer: string
  contact?: string
  data?: unknown
}
const insertEvents = (sql: Sql, accountId: number, events: Event[]) => sql`
  insert into tracking_events (account_id, name, occurred_at, customer_external_id,
    contact_external_id, data)
  select ${accountId}, x->>'name', to_timestamp((x->>'at')::float8 / 1000), x->>'customer',
    x->>'contact',
    nullif(x->'data', 'null')
  from
    jsonb_array_elements(${JSON.stringify(events.map((e) => ({ name: 'login', data: null, ...e })))}::text::jsonb) x`

// In insert order, so ids follow the list; times deliberately out of order.
const BATCH_1: Event[] = [
  {
    at: T - 3000,
    customer: 'c1',
    data: { customer: { country: 'FR', has_sso: 'yes', logins: 5, unknown: 1 } },
  },
  { at: T - 1000, customer: 'c1', data: { customer: { country: 'DE' } } },
  {
    at: T - 2000,
    customer: 'c1',
    data: { customer: { country: 'BE', has_sso: true, plan_started: '2025-06-01' } },
  },
  { at: T, customer: 'c2', data: { customer: { country: 'X' } } },
  // same time: the later id wins
  { at: T, customer: 'c2', data: { customer: { country: 'Y', has_sso: null } } },
  {
    at: T,
    customer: 'nobody',
    contact: 'px',
    data: { customer: { country: 'FR' }, contact: { contact_name: 'X' } },
  },
  {
    at: T - 500,
    customer: 'c1',
    contact: 'p1',
    data: { contact: { role: 'admin', contact_name: 'Patricia' } },
  },
  {
    at: T - 4000,
    customer: 'c1',
    contact: 'p1',
    data: { contact: { role: 'old', contact_name: 'Old' } },
  },
  {
    at: T - 100,
    customer: 'c1',
    contact: 'p2',
    data: { contact: { contact_name: 'Newbie', role: 7 } },
  },
  {
    at: T - 50,
    customer: 'c3',
    contact: 'p2',
    data: { contact: { contact_name: 'Elsewhere', role: 'x' } },
  },
  {
    at: T,
    customer: 'c1',
    contact: 'q1',
    data: { contact: { role: 'admin', contact_name: 'Stolen' } },
  },
  {
    at: T - 10,
    customer: 'c3',
    contact: 'p3',
    data: {
      customer: { country: 'NL', plan_started: '2025-01-01' },
      contact: { contact_name: 'Pat', role: 'member' },
    },
  },
  {
    at: T - 5,
    customer: 'c3',
    contact: 'p3',
    data: { contact: { contact_name: 'x'.repeat(256), role: null } },
  },
  { at: T, customer: 'c3', data: null },
  { at: T, customer: 'c3', contact: 'p4', data: { customer: null, contact: null } },
]
// A second batch: an older value arriving late changes nothing it set; newer ones do.
const BATCH_2: Event[] = [
  { at: T - 5000, customer: 'c1', data: { customer: { country: 'IT' } } },
  {
    at: T + 1000,
    customer: 'c3',
    contact: 'p3',
    data: { customer: { country: 'PT' }, contact: { role: 'lead' } },
  },
  { at: T + 1000, customer: 'c2', contact: 'q1', data: { contact: { role: 'owner' } } },
]

const customers = (accountId: number) => s.sql`
  select external_id, name, attributes from customers where account_id = ${accountId}
    order by external_id`
const contacts = (accountId: number) => s.sql`
  select t.external_id, c.external_id as customer, t.name, t.attributes from contacts t
    join customers c on c.account_id = t.account_id and c.service_id = t.customer_id
  where t.account_id = ${accountId} order by t.external_id`
const events = (accountId: number) => s.sql`
  select e.status, c.external_id as customer, t.external_id as contact from tracking_events e
    left join customers c on c.account_id = e.account_id and c.service_id = e.customer_id
    left join contacts t on t.account_id = e.account_id and t.service_id = e.contact_id
  where e.account_id = ${accountId} order by e.id`
const rows = (r: readonly object[]) => r.map((x) => ({ ...x }))
const state = async (accountId: number) => ({
  customers: rows(await customers(accountId)),
  contacts: rows(await contacts(accountId)),
  events: rows(await events(accountId)),
})

const AFTER_1 = {
  customers: [
    {
      external_id: 'c1',
      name: 'One',
      attributes: { country: 'DE', has_sso: true, plan_started: '2025-06-01' },
    },
    { external_id: 'c2', name: 'Two', attributes: { country: 'Y' } },
    { external_id: 'c3', name: 'Three', attributes: { country: 'NL', plan_started: '2025-01-01' } },
  ],
  contacts: [
    { external_id: 'p1', customer: 'c1', name: 'Patricia', attributes: { role: 'admin' } },
    { external_id: 'p2', customer: 'c1', name: 'Newbie', attributes: {} },
    { external_id: 'p3', customer: 'c3', name: 'Pat', attributes: {} },
    { external_id: 'p4', customer: 'c3', name: null, attributes: {} },
    { external_id: 'q1', customer: 'c2', name: 'Quinn', attributes: { role: 'viewer' } },
  ],
  events: [
    { status: 'applied', customer: 'c1', contact: null },
    { status: 'applied', customer: 'c1', contact: null },
    { status: 'applied', customer: 'c1', contact: null },
    { status: 'applied', customer: 'c2', contact: null },
    { status: 'applied', customer: 'c2', contact: null },
    { status: 'unmatched', customer: null, contact: null },
    { status: 'applied', customer: 'c1', contact: 'p1' },
    { status: 'applied', customer: 'c1', contact: 'p1' },
    { status: 'applied', customer: 'c1', contact: 'p2' },
    { status: 'applied', customer: 'c3', contact: null },
    { status: 'applied', customer: 'c1', contact: null },
    { status: 'applied', customer: 'c3', contact: 'p3' },
    { status: 'applied', customer: 'c3', contact: 'p3' },
    { status: 'applied', customer: 'c3', contact: null },
    { status: 'applied', customer: 'c3', contact: 'p4' },
  ],
}
const AFTER_2 = {
  customers: [
    AFTER_1.customers[0],
    AFTER_1.customers[1],
    { ...AFTER_1.customers[2], attributes: { country: 'PT', plan_started: '2025-01-01' } },
  ],
  contacts: [
    ...AFTER_1.contacts.slice(0, 2),
    { ...AFTER_1.contacts[2], attributes: { role: 'lead' } },
    AFTER_1.contacts[3],
    { ...AFTER_1.contacts[4], attributes: { role: 'owner' } },
  ],
  events: [
    ...AFTER_1.events,
    { status: 'applied', customer: 'c1', contact: null },
    { status: 'applied', customer: 'c3', contact: 'p3' },
    { status: 'applied', customer: 'c2', contact: 'q1' },
  ],
}

const mixedTitle =
  'a mixed batch gives the values, states and counts of the per-statement apply; a rerun changes nothing'
test(mixedTitle, async () => {
  const a = await newAccount()
  await insertEvents(s.sql, a, BATCH_1)
  const first = await s.sql.begin((tx) => applyEvents(tx, a))
  assert.deepEqual(first, { events: 15, customers: 3, contactsCreated: 3, contacts: 3 })
  assert.deepEqual(await state(a), AFTER_1)

  await insertEvents(s.sql, a, BATCH_2)
  const second = await s.sql.begin((tx) => applyEvents(tx, a))
  assert.deepEqual(second, { events: 3, customers: 1, contactsCreated: 0, contacts: 2 })
  assert.deepEqual(await state(a), AFTER_2)

  const again = await s.sql.begin((tx) => applyEvents(tx, a))
  assert.deepEqual(again, { events: 0, customers: 0, contactsCreated: 0, contacts: 0 })
  assert.deepEqual(await state(a), AFTER_2)
})

test('a batch that dies half-way leaves nothing, and its retry gives the same result', async () => {
  const a = await newAccount()
  await insertEvents(s.sql, a, BATCH_1)
  const before = await state(a)
  await assert.rejects(
    s.sql.begin(async (tx) => {
      await applyEvents(tx, a)
      throw new Error('the worker died')
    }),
    /the worker died/,
  )
  assert.deepEqual(await state(a), before)
  assert.deepEqual((await s.sql.begin((tx) => applyEvents(tx, a))).events, 15)
  assert.deepEqual(await state(a), AFTER_1)
})

test('an event whose insert commits after later ones were applied is still applied', async () => {
  const a = await newAccount()
  const open = await s.sql.reserve()
  try {
    await open`begin`
    await insertEvents(open as unknown as Sql, a, [
      { at: T, customer: 'c1', data: { customer: { country: 'LATE' } } },
    ])
    await insertEvents(s.sql, a, [
      { at: T - 1, customer: 'c2', data: { customer: { country: 'EARLY' } } },
    ])
    for (let i = 0; i < 3; i++) await s.sql.begin((tx) => applyEvents(tx, a))
    assert.deepEqual(
      rows(await events(a)),
      [{ status: 'applied', customer: 'c2', contact: null }],
      'the open insert is not seen yet',
    )
    await open`commit`
  } finally {
    open.release()
  }
  assert.equal((await s.sql.begin((tx) => applyEvents(tx, a))).events, 1)
  assert.deepEqual(rows(await events(a)), [
    { status: 'applied', customer: 'c1', contact: null },
    { status: 'applied', customer: 'c2', contact: null },
  ])
  assert.equal((await customers(a))[0].attributes.country, 'LATE')
})

// A Segment track that names its customer is stored as a tracked event (relay.ts) and applied
// by this job, while the group that creates its customer waits for the Segment apply job:
// the track waits for it, then is matched, not marked unmatched; its type and its outcome are
// counted with the messages.
test('a Segment track waits for the group received with it, then is matched and counted', async () => {
  const accountId = await newAccount()
  const batch = [
    { type: 'group', messageId: 'g', userId: 'u', groupId: 'new', traits: { name: 'New' } },
    { type: 'track', messageId: 't', userId: 'u', event: 'login', context: { groupId: 'new' } },
  ]
  await receiveRelay(s.app, accountId, 0, batch)
  const first = await s.sql.begin((tx) => applyEvents(tx, accountId))
  assert.deepEqual(first, {
    events: 0,
    waiting: true,
    customers: 0,
    contactsCreated: 0,
    contacts: 0,
  })
  await s.sql.begin((tx) => applyRelay(tx, accountId))
  const second = await s.sql.begin((tx) => applyEvents(tx, accountId))
  assert.equal(second.events, 1)
  assert.deepEqual(second.segment, { tracks: 1, suppressed: 0, duplicates: 0 })
  const [event] = await s.sql`
    select e.status, c.external_id as customer, t.external_id as contact, e.message_id
      from tracking_events e
      join customers c on c.account_id = e.account_id and c.service_id = e.customer_id
      join contacts t on t.account_id = e.account_id and t.service_id = e.contact_id
    where e.account_id = ${accountId}`
  assert.deepEqual(
    { ...event },
    { status: 'applied', customer: 'new', contact: 'u', message_id: 't' },
  )
  const counts = await s.sql`select kind, key, count::int as n from segment_counts
    where account_id = ${accountId} order by kind, key`
  assert.deepEqual(
    counts.map((r) => [r.kind, r.key, r.n]),
    [
      ['type', 'group', 1],
      ['type', 'track', 1],
    ],
  )
})

// SDKs send the same traits with every call: a group or identify that changes nothing writes
// nothing and rescores nothing; one that changes a trait does.
test('a Segment group or identify that changes nothing writes nothing', async () => {
  const accountId = await newAccount()
  const send = async (n: number, country: string) => {
    await receiveRelay(s.app, accountId, 0, [
      {
        type: 'group',
        messageId: `g${n}`,
        userId: 'p1',
        groupId: 'c1',
        traits: { name: 'One', country },
      },
      {
        type: 'identify',
        messageId: `i${n}`,
        userId: 'p1',
        traits: { name: 'Pia', role: country },
      },
    ])
    return s.sql.begin((tx) => applyRelay(tx, accountId))
  }
  const written = () => s.sql`select xmin::text from customers where account_id = ${accountId}
      and external_id = 'c1'
    union all select xmin::text from contacts where account_id = ${accountId}
      and external_id = 'p1'`
  const first = await send(1, 'DE')
  assert.deepEqual([first.customers, first.contacts], [1, 1])
  const before = await written()
  const same = await send(2, 'DE')
  assert.deepEqual([same.customers, same.contacts], [0, 0])
  assert.deepEqual(await written(), before)
  const changed = await send(3, 'FR')
  assert.deepEqual([changed.customers, changed.contacts], [1, 1])
})
