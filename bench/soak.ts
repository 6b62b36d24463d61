// Soak: a mixed workload for BENCH_SOAK_SECONDS (120) against two `serve` processes (HTTP + worker)
// and one `worker`, all on one database, as a deployment of several processes runs. Closed-loop
// clients (each sends its next request as soon as the last is answered, so the rate is the highest
// the machine sustains) spread over both serve processes: uploads of 100 customers with attributes
// and snapshots, searches of a few filter shapes paged up to three deep, tracking posts of 50
// events. Reported: per endpoint the accepted requests per second, p50/p99 of the 2xx answers, 5xx,
// other errors and 429 backpressure (honoured by waiting Retry-After, not an error); the backlog
// left when the load stops, the time it takes to drain and how long uploads waited to be processed;
// jobs left failing; records lost, counted in the database against every acknowledged customer,
// snapshot and event; and the RSS of every process, sampled every 5 s (the series goes to stderr).
import postgres from 'postgres'
import { startServer, startWorker } from './server.ts'
import { percentile, rssMb, type BenchContext } from './lib.ts'

const SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 120)
// Per serve process: with two of them 10 requests are in flight, about what 2 shared cores take.
const CLIENTS = { upload: 1, search: 2, track: 2 }
const CUSTOMERS_PER_UPLOAD = 100
const EVENTS_PER_REQUEST = 50
const PAGES = 3
const PAGE_SIZE = 50
// Customers uploaded before the load, so that tracking events match records from the start.
const SEED_CUSTOMERS = 1000
const SNAPSHOT_DATES = ['2026-09-01', '2026-10-01', '2026-11-01']
const RSS_EVERY_MS = 5000
// RSS before this is start-up and caches filling, not growth.
const WARM_UP_MS = Math.min(30, SECONDS / 4) * 1000
const REQUEST_TIMEOUT_MS = 60_000
const DRAIN_LIMIT_MS = 600_000
const STOP_LIMIT_MS = 30_000
// Per-key quotas out of the way: the soak looks for the machine's limit. The pending-uploads
// backpressure stays at its default, as clients meet it in production.
const ENV = { SERVICE_API_RATE_LIMIT: '1000000000', SERVICE_TRACK_RATE_LIMIT: '1000000000' }
// Event n is sent with timestamp T0 + n ms: its occurred_at identifies it when counting.
const T0 = Date.now() - 86_400_000

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

// ---------------------------------------------------------------------------------------------
// Processes

interface Proc {
  name: string
  pid: number
  stop: () => Promise<unknown>
  rss: number[]
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

// SIGTERM drains in-flight requests and jobs. A process that died earlier is skipped; one that
// outlives the limit is killed.
const stop = async (p: Proc) => {
  if (!alive(p.pid)) return
  const stopped = await Promise.race([
    p.stop().then(() => true),
    sleep(STOP_LIMIT_MS).then(() => false),
  ])
  if (!stopped) {
    process.stderr.write(
      `soak: ${p.name} (pid ${p.pid}) still running ${STOP_LIMIT_MS / 1000} s after SIGTERM; killed\n`,
    )
    try {
      process.kill(p.pid, 'SIGKILL')
    } catch {
      /* exited meanwhile */
    }
  }
}

const startProcesses = async (url: string, procs: Proc[]) => {
  const servers = []
  for (const n of [1, 2]) {
    const server = await startServer(url, ENV)
    servers.push(server)
    procs.push({ name: `serve ${n}`, pid: server.pid, stop: server.stop, rss: [] })
  }
  const worker = startWorker(url, ENV)
  procs.push({ name: 'worker', pid: worker.pid, stop: worker.stop, rss: [] })
  return { servers, workerStderr: worker.stderr }
}

// ---------------------------------------------------------------------------------------------
// Account and data

type Server = Awaited<ReturnType<typeof startServer>>

const setUpAccount = async (server: Server) => {
  const account = await server.admin('POST', '/accounts', { name: 'Soak' })
  const path = `/accounts/${account.id}`
  for (const [kind, codename, type] of [
    ['attribute', 'country', 'string'],
    ['attribute', 'plan', 'string'],
    ['attribute', 'employees', 'number'],
    ['metric', 'logins', 'number'],
    ['metric', 'seats', 'number'],
  ]) {
    await server.admin('POST', `${path}/properties`, { entity: 'customer', kind, codename, type })
  }
  await server.admin('PUT', `${path}/scoring`, {
    customer: {
      engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }],
      fit: [{ codename: 'country', weight: 100, values: { US: 100 }, default: 0 }],
    },
  })
  const { tracker_key } = await server.admin('PUT', `${path}/tracking`, { domains: ['soak.test'] })
  const { token } = await server.admin('POST', `${path}/keys`, {})
  return { id: account.id as number, token: token as string, trackerKey: tracker_key as string }
}

const customer = (externalId: string, n: number) => ({
  external_id: externalId,
  name: `Customer ${n}`,
  attributes: {
    country: ['US', 'DE', 'FR', 'GB'][n % 4],
    plan: ['free', 'pro', 'enterprise'][n % 3],
    employees: 10 + (n % 990),
  },
  metrics: SNAPSHOT_DATES.map((date, m) => ({
    date,
    logins: (n + m * 7) % 50,
    seats: 1 + (n % 20),
  })),
})

const event = (n: number) => {
  const customerId = `seed-${n % SEED_CUSTOMERS}`
  return {
    name: ['page_view', 'login', 'feature_used'][n % 3],
    timestamp: T0 + n,
    identification: { customer: customerId, contact: `${customerId}-c${n % 3}` },
    data:
      n % 10 === 0
        ? {
            customer: { plan: ['free', 'pro', 'enterprise'][n % 3] },
            contact: { contact_name: `Person ${n % 3}` },
          }
        : { contact: { last_page: `/app/page/${n % 50}` } },
  }
}

const f = (propertyName: string, operator: string, value: string | string[]) =>
  Array.isArray(value)
    ? { propertyName, operator, values: value }
    : { propertyName, operator, value }

const SEARCHES = [
  [],
  [f('country', 'EQ', 'DE')],
  [f('engagementscore', 'GTE', '50')],
  [f('plan', 'IN', ['pro', 'enterprise']), f('employees', 'GTE', '500')],
  [f('name', 'LIKE', 'customer 12')],
]

// ---------------------------------------------------------------------------------------------
// Load

interface Endpoint {
  name: string
  ok: number
  client: number
  server: number
  throttled: number
  network: number
  latencies: number[]
  samples: string[]
}
type Answer = { status: number; text: string; retryAfter: number } | null

const endpoint = (name: string): Endpoint => ({
  name,
  ok: 0,
  client: 0,
  server: 0,
  throttled: 0,
  network: 0,
  latencies: [],
  samples: [],
})

// The first few failures of each endpoint are kept to describe them in the report.
const keepSample = (e: Endpoint, what: string) => {
  if (e.samples.length < 3) e.samples.push(what)
}

const count = (e: Endpoint, status: number, text: string, ms: number) => {
  if (status >= 200 && status < 300) {
    e.ok++
    e.latencies.push(ms)
  } else if (status === 429) {
    e.throttled++
  } else {
    if (status >= 500) e.server++
    else e.client++
    keepSample(e, `${status} ${text.slice(0, 300)}`)
  }
}

// null when no answer came (connection error, or none within REQUEST_TIMEOUT_MS).
const post = async (e: Endpoint, url: string, token: string, body: string): Promise<Answer> => {
  const started = performance.now()
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'service-key': token, 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    })
    const text = await res.text()
    count(e, res.status, text, performance.now() - started)
    return { status: res.status, text, retryAfter: Number(res.headers.get('retry-after') ?? 1) }
  } catch (err) {
    e.network++
    keepSample(e, String((err as Error).cause ?? err)) // fetch's own message is only 'fetch failed'
    return null
  }
}

// After a 429 the client waits Retry-After, after a network error a second (a dead process would
// otherwise be hammered), never past the end of the run.
const pause = (answer: Answer, deadline: number) => {
  const ms = answer === null ? 1000 : answer.status === 429 ? answer.retryAfter * 1000 : 0
  return sleep(Math.min(ms, deadline - performance.now()))
}

interface Load {
  token: string
  trackerKey: string
  deadline: number
  endpoints: { upload: Endpoint; search: Endpoint; track: Endpoint }
  uploads: number
  trackRequests: number
  ackedCustomers: string[]
  ackedEventBlocks: number[]
}

const uploadOnce = async (load: Load, base: string) => {
  const n = load.uploads++
  const customers = Array.from({ length: CUSTOMERS_PER_UPLOAD }, (_, i) =>
    customer(`soak-${n}-${i}`, n * CUSTOMERS_PER_UPLOAD + i),
  )
  const answer = await post(
    load.endpoints.upload,
    `${base}/api/v1/customers`,
    load.token,
    JSON.stringify({ customers }),
  )
  if (answer?.status === 200) load.ackedCustomers.push(...customers.map((c) => c.external_id))
  else await pause(answer, load.deadline)
}

const searchPages = async (load: Load, base: string, filters: object[]) => {
  let after: number | undefined
  for (let page = 0; page < PAGES; page++) {
    const answer = await post(
      load.endpoints.search,
      `${base}/api/v1/customers/search`,
      load.token,
      JSON.stringify({ filters, limit: PAGE_SIZE, after }),
    )
    if (answer?.status !== 200) return pause(answer, load.deadline)
    after = JSON.parse(answer.text).paging?.next?.after
    if (after === undefined) return
  }
}

// Request n carries events n * EVENTS_PER_REQUEST and on: a 200 acknowledges that block.
const trackOnce = async (load: Load, base: string) => {
  const n = load.trackRequests++
  const events = Array.from({ length: EVENTS_PER_REQUEST }, (_, i) =>
    event(n * EVENTS_PER_REQUEST + i),
  )
  const answer = await post(
    load.endpoints.track,
    `${base}/api/tracker/track`,
    load.token,
    JSON.stringify({ trackerKey: load.trackerKey, events }),
  )
  if (answer?.status === 200) load.ackedEventBlocks.push(n)
  else await pause(answer, load.deadline)
}

const until = async (deadline: number, step: () => Promise<unknown>) => {
  while (performance.now() < deadline) await step()
}

const runLoad = (load: Load, bases: string[]) =>
  Promise.all(
    bases.flatMap((base) => [
      ...Array.from({ length: CLIENTS.upload }, () =>
        until(load.deadline, () => uploadOnce(load, base)),
      ),
      ...Array.from({ length: CLIENTS.search }, (_, c) => {
        let shape = c
        return until(load.deadline, () =>
          searchPages(load, base, SEARCHES[shape++ % SEARCHES.length]),
        )
      }),
      ...Array.from({ length: CLIENTS.track }, () =>
        until(load.deadline, () => trackOnce(load, base)),
      ),
    ]),
  )

// ---------------------------------------------------------------------------------------------
// Database checks

const backlog = async (sql: postgres.Sql, accountId: number) =>
  (
    await sql`
  select (select count(*)::int from uploads where account_id = ${accountId}
    and status in ('received', 'processing')) as uploads,
    (select count(*)::int from tracking_events where account_id = ${accountId}
      and status = 'received') as events,
    (select count(*)::int from graphile_worker.jobs where locked_at is null
      and attempts < max_attempts) as jobs`
  )[0]

// Seconds until no upload is waiting and every event is applied.
const drain = async (sql: postgres.Sql, accountId: number) => {
  const started = performance.now()
  for (;;) {
    const left = await backlog(sql, accountId)
    if (left.uploads === 0 && left.events === 0) return (performance.now() - started) / 1000
    if (performance.now() - started > DRAIN_LIMIT_MS)
      throw new Error(
        `backlog not drained after ${DRAIN_LIMIT_MS / 1000} s: ${JSON.stringify(left)}`,
      )
    await sleep(200)
  }
}

// Returns the seed's upload id: the run's uploads are those after it.
const seed = async (server: Server, sql: postgres.Sql, account: { id: number; token: string }) => {
  const customers = Array.from({ length: SEED_CUSTOMERS }, (_, i) => customer(`seed-${i}`, i))
  const res = await fetch(`${server.base}/api/v1/customers`, {
    method: 'POST',
    headers: { 'service-key': account.token, 'content-type': 'application/json' },
    body: JSON.stringify({ customers }),
  })
  if (res.status !== 200) throw new Error(`seed upload: ${res.status} ${await res.text()}`)
  await drain(sql, account.id)
  return (await res.json()).upload_id as number
}

// Uploads are processed one at a time per account, behind the account's other jobs: the time from
// the 200 to the records being there is what a client of a busy account waits.
const uploadLag = async (sql: postgres.Sql, accountId: number, afterId: number) =>
  (
    await sql`
  select percentile_cont(array[0.5, 0.99]) within group (order by extract(epoch
    from processed_at - received_at)) as seconds
  from uploads where account_id = ${accountId} and id > ${afterId}`
  )[0].seconds as [number, number]

// Completed jobs are deleted; one still there with an error is failing (and retried or given up).
const failingJobs = async (sql: postgres.Sql) =>
  (await sql`select count(*)::int as n from graphile_worker.jobs where last_error is not null`)[0]
    .n as number

// Every acknowledged customer once, with all its snapshots.
const countCustomers = async (sql: postgres.Sql, accountId: number, ids: string[]) =>
  (
    await sql`
  with acked as (select unnest(${ids}::text[]) collate "C" as external_id), found as (
    select c.account_id, c.service_id, c.external_id from acked
      join customers c on c.account_id = ${accountId}
      and c.external_id = acked.external_id
  )
  select (select count(*)::int from acked) - (select count(distinct external_id)::int from found)
    as lost,
    (select count(*)::int - count(distinct external_id)::int from found) as duplicates,
    (select count(*)::int from found join customer_snapshots s on s.account_id = found.account_id
      and s.customer_id = found.service_id) as snapshots,
    (select count(*)::int from uploads where account_id = ${accountId} and status = 'failed')
      as failed_uploads`
  )[0]

// Every event of every acknowledged block, found by its occurred_at.
const countEvents = async (sql: postgres.Sql, accountId: number, blocks: number[]) =>
  (
    await sql`
  with stored as (
    select round(extract(epoch from occurred_at) * 1000)::bigint - ${T0}::bigint as n,
    count(*)::int as copies
    from tracking_events where account_id = ${accountId} group by 1
  ), acked as (
    select b * ${EVENTS_PER_REQUEST} + i as n
      from unnest(${blocks}::bigint[]) b, generate_series(0, ${EVENTS_PER_REQUEST - 1}) i
  )
  select (select count(*)::int from acked where not exists (select 1 from stored
    where stored.n = acked.n)) as lost,
    (select coalesce(sum(copies - 1), 0)::int from stored) as duplicates,
    (select count(*)::int from tracking_events where account_id = ${accountId}
      and status = 'unmatched') as unmatched`
  )[0]

// ---------------------------------------------------------------------------------------------
// Report

// items: what one request carries, and how many.
const reportEndpoint = (
  ctx: BenchContext,
  e: Endpoint,
  seconds: number,
  items?: [string, number],
) => {
  const sorted = [...e.latencies].sort((a, b) => a - b)
  ctx.report({ bench: 'soak', metric: `${e.name} accepted`, value: e.ok / seconds, unit: 'req/s' })
  if (items)
    ctx.report({
      bench: 'soak',
      metric: `${e.name} ${items[0]} accepted`,
      value: (e.ok * items[1]) / seconds,
      unit: `${items[0]}/s`,
    })
  ctx.report({
    bench: 'soak',
    metric: `${e.name} p50 (2xx)`,
    value: percentile(sorted, 50),
    unit: 'ms',
  })
  ctx.report({
    bench: 'soak',
    metric: `${e.name} p99 (2xx)`,
    value: percentile(sorted, 99),
    unit: 'ms',
  })
  ctx.report({
    bench: 'soak',
    metric: `${e.name} 5xx`,
    value: e.server,
    unit: 'requests',
    target: '0',
  })
  ctx.report({
    bench: 'soak',
    metric: `${e.name} other 4xx, no answer`,
    value: e.client + e.network,
    unit: 'requests',
    target: '0',
  })
  ctx.report({
    bench: 'soak',
    metric: `${e.name} 429 (backpressure)`,
    value: e.throttled,
    unit: 'requests',
  })
  for (const s of e.samples) process.stderr.write(`soak: ${e.name}: ${s}\n`)
}

const reportRss = (ctx: BenchContext, p: Proc, warmIndex: number) => {
  const warm = p.rss[Math.min(warmIndex, p.rss.length - 1)]
  const last = p.rss[p.rss.length - 1]
  ctx.report({ bench: 'soak', metric: `RSS ${p.name}, first sample`, value: p.rss[0], unit: 'MB' })
  ctx.report({ bench: 'soak', metric: `RSS ${p.name}, max`, value: Math.max(...p.rss), unit: 'MB' })
  ctx.report({
    bench: 'soak',
    metric: `RSS ${p.name}, last vs after warm-up`,
    value: last,
    unit: 'MB',
    baseline: warm,
    ratio: last / warm,
    target: 'flat (~1)',
  })
  process.stderr.write(
    `soak: RSS ${p.name} (pid ${p.pid}) every ${RSS_EVERY_MS / 1000} s: ` +
      `${p.rss.map((mb) => mb.toFixed(0)).join(' ')} MB\n`,
  )
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const procs: Proc[] = []
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const { servers, workerStderr } = await startProcesses(url, procs)
    const account = await setUpAccount(servers[0])
    const seedUpload = await seed(servers[0], sql, account)

    const load: Load = {
      token: account.token,
      trackerKey: account.trackerKey,
      deadline: performance.now() + SECONDS * 1000,
      endpoints: {
        upload: endpoint('upload'),
        search: endpoint('search'),
        track: endpoint('track'),
      },
      uploads: 0,
      trackRequests: 0,
      ackedCustomers: [],
      ackedEventBlocks: [],
    }
    const sample = () => {
      for (const p of procs) p.rss.push(rssMb(p.pid))
    }
    sample()
    const sampler = setInterval(sample, RSS_EVERY_MS)
    const started = performance.now()
    try {
      await runLoad(
        load,
        servers.map((s) => s.base),
      )
    } finally {
      clearInterval(sampler)
    }
    sample()
    const seconds = (performance.now() - started) / 1000

    reportEndpoint(ctx, load.endpoints.upload, seconds, ['customers', CUSTOMERS_PER_UPLOAD])
    reportEndpoint(ctx, load.endpoints.search, seconds)
    reportEndpoint(ctx, load.endpoints.track, seconds, ['events', EVENTS_PER_REQUEST])
    const left = await backlog(sql, account.id)
    ctx.report({
      bench: 'soak',
      metric: 'backlog at end of load: uploads waiting',
      value: left.uploads,
      unit: 'uploads',
    })
    ctx.report({
      bench: 'soak',
      metric: 'backlog at end of load: events to apply',
      value: left.events,
      unit: 'events',
    })
    ctx.report({
      bench: 'soak',
      metric: 'backlog at end of load: jobs waiting',
      value: left.jobs,
      unit: 'jobs',
    })
    ctx.report({
      bench: 'soak',
      metric: 'time to drain the backlog',
      value: await drain(sql, account.id),
      unit: 's',
    })
    const [lag50, lag99] = await uploadLag(sql, account.id, seedUpload)
    ctx.report({ bench: 'soak', metric: 'upload 200 -> processed p50', value: lag50, unit: 's' })
    ctx.report({ bench: 'soak', metric: 'upload 200 -> processed p99', value: lag99, unit: 's' })
    ctx.report({
      bench: 'soak',
      metric: 'jobs failing (an error, not completed)',
      value: await failingJobs(sql),
      unit: 'jobs',
      target: '0',
    })

    const customers = await countCustomers(sql, account.id, load.ackedCustomers)
    const events = await countEvents(sql, account.id, load.ackedEventBlocks)
    ctx.report({
      bench: 'soak',
      metric: `customers lost (of ${load.ackedCustomers.length} acked)`,
      value: customers.lost,
      unit: 'records',
      target: '0',
    })
    ctx.report({
      bench: 'soak',
      metric: 'customers stored more than once',
      value: customers.duplicates,
      unit: 'records',
      target: '0',
    })
    ctx.report({
      bench: 'soak',
      metric: 'snapshots lost',
      value: load.ackedCustomers.length * SNAPSHOT_DATES.length - customers.snapshots,
      unit: 'records',
      target: '0',
    })
    ctx.report({
      bench: 'soak',
      metric: 'uploads failed',
      value: customers.failed_uploads,
      unit: 'uploads',
      target: '0',
    })
    ctx.report({
      bench: 'soak',
      metric: `events lost (of ${load.ackedEventBlocks.length * EVENTS_PER_REQUEST} acked)`,
      value: events.lost,
      unit: 'events',
      target: '0',
    })
    ctx.report({
      bench: 'soak',
      metric: 'events stored more than once',
      value: events.duplicates,
      unit: 'events',
      target: '0',
    })
    ctx.report({
      bench: 'soak',
      metric: 'events unmatched (no such customer)',
      value: events.unmatched,
      unit: 'events',
      target: '0',
    })

    const warmIndex = Math.ceil(WARM_UP_MS / RSS_EVERY_MS)
    for (const p of procs) reportRss(ctx, p, warmIndex)
    if (workerStderr()) process.stderr.write(`soak: worker stderr:\n${workerStderr()}\n`)
  } finally {
    await Promise.all(procs.map(stop))
    await sql.end()
  }
}
