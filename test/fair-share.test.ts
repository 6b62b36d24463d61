// An account's share of expensive requests (searches, aggregates, segment searches) in one process:
// past it a 429 with Retry-After, while another account is served; a place is given back when its
// client goes. A lock on the customers table keeps the searches running (waiting in PostgreSQL)
// for as long as the test needs, and pg_locks tells when they are.
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { after, before, test } from 'node:test'
import { lockTable } from './helpers/db.ts'
import { eventually } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  // No worker: nothing but the test's searches waits on the customers table.
  s = await startTestService(
    { expensivePerAccount: 2, expensiveWaiting: 0 },
    { http: true, worker: false },
  )
})
after(() => s.stop())

type Account = Awaited<ReturnType<TestService['account']>>

const search = (account: Account, signal?: AbortSignal) =>
  fetch(`${s.base}/api/v1/customers/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'service-key': account.token },
    body: '{}',
    signal,
  })

const lockCustomers = () => lockTable(s.sql, 'customers')
const waitingSearches = (n: number) =>
  eventually(async () => {
    const [{ waiting }] = await s.sql`
      select count(*)::int as waiting from pg_locks where relation = 'customers'::regclass
        and not granted`
    return waiting >= n
  }, `${n} searches waiting`)

test('past its share an account gets 429s for every expensive route, while another account is served', async () => {
  const [a, b] = [await s.account('A'), await s.account('B')]
  const segment = await a.api('/api/v1/segments', { name: 'All' })
  assert.equal(segment.status, 201)
  const unlock = await lockCustomers()
  const running = [search(a), search(a)]
  await waitingSearches(2)

  const refused = await Promise.all([
    a.api('/api/v1/customers/search', {}),
    a.api('/api/v1/contacts/search', {}),
    a.api('/api/v1/customers/aggregate', {}),
    a.api(`/api/v1/segments/${segment.body.id}/search`, {}),
    a.api('/api/v1/insights/week', undefined, 'GET'),
  ])
  for (const answer of refused) {
    assert.equal(answer.status, 429, JSON.stringify(answer.body))
    assert.equal(answer.headers.get('retry-after'), '1')
    assert.match(answer.headers.get('content-type') ?? '', /^application\/problem\+json/)
    assert.match(
      answer.body.detail,
      /^An account runs at most 2 searches, aggregates and segment searches at once/,
    )
  }
  // Other routes of the account are not counted.
  assert.equal((await a.api('/api/v1/segments', undefined, 'GET')).status, 200)

  const other = search(b)
  await waitingSearches(3)
  await unlock()
  for (const answer of [...running, other]) assert.equal((await answer).status, 200)
  // Their places are given back.
  assert.equal((await a.api('/api/v1/customers/search', {})).status, 200)
})

test('a place is given back when its client goes, before the work it started ends', async () => {
  const a = await s.account('Leaving')
  const unlock = await lockCustomers()
  try {
    const leaving = new AbortController()
    const running = [search(a, leaving.signal).catch(() => 'aborted'), search(a)]
    await waitingSearches(2)
    // A segment search of no segment is gated like any, and answers 404 at once once let in.
    const probe = async () => (await a.api('/api/v1/segments/999999/search', {})).status
    assert.equal(await probe(), 429)
    leaving.abort()
    await eventually(async () => (await probe()) === 404, 'a place given back')
    assert.equal(await probe(), 404)
    await unlock()
    assert.equal(await running[0], 'aborted')
    assert.equal(((await running[1]) as Response).status, 200)
  } finally {
    await unlock()
  }
})

test('a streamed export holds its place until its stream ends, not only until its first byte', async () => {
  const a = await s.account('Exporting')
  // No worker runs here to process an upload: the record is written as one would leave it.
  await s.sql`insert into customers (account_id, external_id, name) values (${a.id}, 'c1', 'One')`
  // Megabytes of events, more than the loopback socket buffers hold, so the export waits
  // on its reader.
  await s.sql`insert into tracking_events (account_id, name, occurred_at, customer_external_id,
    data, status)
    select ${a.id}, 'login', now(), 'c1', jsonb_build_object('pad', repeat('x', 6000)), 'applied'
    from generate_series(1, 2000)`
  const exporting = () => {
    const req = request(`${s.base}/api/v1/customer/c1/export`, {
      headers: { 'service-key': a.token },
    })
    const started = new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      req.on('response', (res) => res.once('data', () => resolve(res.pause())))
      req.on('error', reject)
      req.end()
    })
    return { req, started }
  }
  const first = exporting()
  const second = exporting()
  try {
    const [one, two] = await Promise.all([first.started, second.started])
    assert.deepEqual([one.statusCode, two.statusCode], [200, 200])
    // Both streams are open and paused: the account's two places are theirs.
    const refused = await a.api('/api/v1/customers/search', {})
    assert.equal(refused.status, 429, JSON.stringify(refused.body))
    // A stream read to its end gives its place back.
    one.resume()
    await new Promise((resolve) => one.on('end', resolve))
    await eventually(
      async () => (await a.api('/api/v1/customers/search', {})).status === 200,
      'a place back',
    )
  } finally {
    first.req.destroy()
    second.req.destroy()
  }
})
