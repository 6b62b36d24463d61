// Tracking intake: requests of 100 events from 16 concurrent clients (autocannon), against the
// service (`serve`: HTTP + worker, its rate limit raised) and, in the same run, against a bare
// node:http server that only reads and JSON.parses the same bodies. Each server is its own process.
// Beside them, the same INSERTs straight through the driver: what PostgreSQL alone sustains.
// The worker's pace is set against the intake of the same run: the events it applied while the load
// ran, and the backlog left after it, drained with nothing else running.
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import postgres from 'postgres'
import { connect } from '../src/db/client.ts'
import { waitingSql } from '../src/tracking/intake/cursor.ts'
import { startServer } from './server.ts'
import type { BenchContext } from './lib.ts'

const SECONDS = Number(process.env.BENCH_TRACKING_SECONDS ?? 15)
const CONNECTIONS = 16
const EVENTS = 100
const CUSTOMERS = 1000
const NAMES = ['page_view', 'login', 'feature_used', 'export', 'invite_sent']

// Eight different bodies of 100 realistic events (about 22 KB each), cycled by every connection.
const bodies = (trackerKey: string) =>
  Array.from({ length: 8 }, (_, b) =>
    JSON.stringify({
      trackerKey,
      events: Array.from({ length: EVENTS }, (_, i) => {
        const n = b * EVENTS + i
        const customer = `cust-${n % CUSTOMERS}`
        return {
          name: NAMES[n % NAMES.length],
          timestamp: Date.now() - n * 1000,
          identification: { customer, contact: `${customer}-contact-${n % 3}` },
          data:
            n % 4 === 0
              ? {
                  customer: { plan: ['free', 'pro', 'enterprise'][n % 3] },
                  contact: { contact_name: `Person ${n % 3}`, role: 'member' },
                }
              : { contact: { last_page: `/app/page/${n % 50}` } },
        }
      }),
    }),
  )

const bare = () =>
  new Promise<number>((resolve) => {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        const payload = JSON.stringify({ status: 'received', events: body.events.length })
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        })
        res.end(payload)
      })
    })
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port))
  })

// Run as a child: `bench/tracking.ts bare` prints the port it listens on.
if (process.argv[2] === 'bare') process.stdout.write(`${await bare()}\n`)

const load = (
  base: string,
  headers: Record<string, string>,
  requests: string[],
  duration: number,
) =>
  autocannon({
    url: `${base}/api/tracker/track`,
    method: 'POST',
    connections: CONNECTIONS,
    duration,
    headers: { 'content-type': 'application/json', ...headers },
    requests: requests.map((body) => ({ method: 'POST', body })),
  })

const checked = (result: autocannon.Result) => {
  if (result.non2xx || result.errors || result.timeouts) {
    throw new Error(
      `${result.url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    )
  }
  return result
}

// `applied` counts the events the worker has applied so far, read just before and after the load.
const measure = async (
  base: string,
  headers: Record<string, string>,
  requests: string[],
  applied = async () => 0,
) => {
  checked(await load(base, headers, requests, 3)) // warm-up: only its answers count
  const [before, started] = [await applied(), performance.now()]
  const result = checked(await load(base, headers, requests, SECONDS))
  const [after, ended] = [await applied(), performance.now()]
  return {
    eventsPerSecond: (result.requests.total * EVENTS) / SECONDS,
    p99: result.latency.p99,
    appliedPerSecond: (after - before) / ((ended - started) / 1000),
  }
}

const measureBare = async (requests: string[]) => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'bare'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  try {
    const port: number = await new Promise((resolve) =>
      child.stdout.once('data', (d) => resolve(Number(String(d).trim()))),
    )
    return await measure(`http://127.0.0.1:${port}`, {}, requests)
  } finally {
    child.kill()
  }
}

// The database's own ceiling for this intake: CONNECTIONS connections committing the same
// multi-row INSERT the endpoint runs, with no HTTP, validation, key check or job, for another
// account whose events nothing applies.
const measureInserts = async (url: string, requests: string[]) => {
  const sql = postgres(url, { max: CONNECTIONS, onnotice: () => {} })
  try {
    const [{ id }] =
      await sql`insert into accounts (name, tracker_key) values ('Ceiling', 'CS-CEILING')
        returning id`
    const insert = (body: string) => sql`
      insert into tracking_events (account_id, name, occurred_at, customer_external_id,
        contact_external_id, data)
      select ${id}, x->>'name', to_timestamp((x->>'timestamp')::float8 / 1000),
        x#>>'{identification,customer}', x#>>'{identification,contact}', nullif(x->'data', 'null')
      from jsonb_array_elements((${body}::text::jsonb)->'events') x`
    let done = 0
    const deadline = performance.now() + SECONDS * 1000
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async (_, c) => {
        for (let i = c; performance.now() < deadline; i++, done++)
          await insert(requests[i % requests.length])
      }),
    )
    return (done * EVENTS) / SECONDS
  } finally {
    await sql.end()
  }
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const server = await startServer(url, { SERVICE_TRACK_RATE_LIMIT: '100000000' })
  const sql = connect(url, { max: 1 })
  try {
    const account = await server.admin('POST', '/accounts', { name: 'Bench' })
    await server.admin('PUT', `/accounts/${account.id}/tracking`, { domains: ['bench.test'] })
    await server.admin('POST', `/accounts/${account.id}/properties`, {
      entity: 'customer',
      kind: 'attribute',
      codename: 'plan',
      type: 'string',
    })
    await server.admin('POST', `/accounts/${account.id}/properties`, {
      entity: 'contact',
      kind: 'attribute',
      codename: 'role',
      type: 'string',
    })
    await sql`
      insert into customers (account_id, external_id, name)
      select ${account.id}, 'cust-' || i, 'Customer ' || i
        from generate_series(0, ${CUSTOMERS - 1}) i`
    await sql`analyze customers` // as a live database would have its statistics
    const { token } = await server.admin('POST', `/accounts/${account.id}/keys`, {
      scopes: ['track'],
    })
    const requests = bodies(account.tracker_key)

    const baseline = await measureBare(requests)
    const ceiling = await measureInserts(url, requests)
    const applied = async () => {
      const [{ n }] =
        await sql`select count(*)::int as n from tracking_events where account_id = ${account.id}
        and status <> 'received'`
      return n as number
    }
    const service = await measure(server.base, { 'service-key': token }, requests, applied)

    // The worker applies while the load runs; what is left is drained now, by the worker alone:
    // its own pace, the one a backlog shrinks at once the load stops. The backlog is counted once;
    // then the poll asks only whether one event is left, so that it takes nothing from the worker.
    // Only events from the apply job's cursor on can still be received (src/tracking/apply.ts).
    const received = waitingSql(sql, 'tracking_events', account.id)
    const drainStarted = performance.now()
    const [{ backlog }] = await sql`select count(*)::int as backlog from (${received}) w`
    while ((await sql`select 1 from (${received}) w limit 1`).length)
      await new Promise((r) => setTimeout(r, 100))
    const drainSeconds = (performance.now() - drainStarted) / 1000
    const drainPerSecond = backlog / drainSeconds
    const [{ total }] =
      await sql`select count(*)::int as total from tracking_events where account_id = ${account.id}`

    ctx.report({
      bench: 'tracking',
      metric: 'bare node:http, JSON.parse of the same bodies',
      value: baseline.eventsPerSecond,
      unit: 'events/s',
    })
    ctx.report({
      bench: 'tracking',
      metric: `POST /api/tracker/track, ${EVENTS} events x ${CONNECTIONS} clients`,
      value: service.eventsPerSecond,
      unit: 'events/s',
      baseline: baseline.eventsPerSecond,
      ratio: service.eventsPerSecond / baseline.eventsPerSecond,
      target: '>= 0.4',
    })
    ctx.report({
      bench: 'tracking',
      metric: `the same INSERTs through the driver, ${CONNECTIONS} connections (database ceiling)`,
      value: ceiling,
      unit: 'events/s',
      baseline: baseline.eventsPerSecond,
      ratio: ceiling / baseline.eventsPerSecond,
    })
    ctx.report({
      bench: 'tracking',
      metric: 'tracking against the database ceiling',
      value: service.eventsPerSecond,
      unit: 'events/s',
      baseline: ceiling,
      ratio: service.eventsPerSecond / ceiling,
    })
    ctx.report({
      bench: 'tracking',
      metric: 'p99 latency, bare node:http',
      value: baseline.p99,
      unit: 'ms',
    })
    ctx.report({
      bench: 'tracking',
      metric: 'p99 latency, tracking (200 after commit)',
      value: service.p99,
      unit: 'ms',
      baseline: baseline.p99,
    })
    ctx.report({
      bench: 'tracking',
      metric: 'events applied after the load (backlog drain)',
      value: drainSeconds,
      unit: 's',
    })
    ctx.report({
      bench: 'tracking',
      metric: `apply, the backlog of ${backlog} drained, against intake`,
      value: drainPerSecond,
      unit: 'events/s',
      baseline: service.eventsPerSecond,
      ratio: drainPerSecond / service.eventsPerSecond,
      target: '>= 0.8 (goal >= 1)',
    })
    ctx.report({
      bench: 'tracking',
      metric: 'apply while the load runs, against intake',
      value: service.appliedPerSecond,
      unit: 'events/s',
      baseline: service.eventsPerSecond,
      ratio: service.appliedPerSecond / service.eventsPerSecond,
    })
    ctx.report({
      bench: 'tracking',
      metric: 'events stored in the run (warm-up included)',
      value: total,
      unit: 'events',
    })
  } finally {
    await sql.end()
    await server.stop()
  }
}
