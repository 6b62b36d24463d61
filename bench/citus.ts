// The service on one PostgreSQL and on a three-node Citus cluster (a coordinator and two workers,
// test/helpers/citus.ts), all on this machine: the same mixed load on both, for a fixed time. Four
// tenants of 2,000 customers with 12 monthly snapshots each (bench/scoring's seed, by COPY, then
// scored); then, at once, uploads (updates of 100 customers), searches (four shapes), tracking (50
// events a request) and the "This week" report, each from its own closed-loop clients cycling over
// the tenants. Each side runs the built executable (`serve`: HTTP and the worker) with DATABASE_URL
// on its database: on the cluster, the coordinator's, which migrate distributes
// (src/db/distribute.ts). The single node is a database without the citus extension on the
// coordinator's own server, so that both sides have the same PostgreSQL (15), settings and
// durability (fsync and synchronous commit on, as deployed: a write that spans nodes pays Citus's
// two-phase commit). The ratios are cluster / single; on 2 shared cores the cluster cannot be
// faster: they show what the routing costs. The jobs still failing after the load (what Citus
// refuses) are counted and printed.
import { readdirSync, readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import postgres from 'postgres'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { citusMissing, startCitusCluster } from '../test/helpers/citus.ts'
import { percentile, type BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'
import { startServer } from './server.ts'

const SECONDS = Number(process.env.BENCH_CITUS_SECONDS ?? 30)
const WARMUP = 5
const TENANTS = 4
const CUSTOMERS = Number(process.env.BENCH_CITUS_CUSTOMERS ?? 2000) // per tenant
const UPLOAD = 100
const EVENTS = 50
const TODAY = new Date().toISOString().slice(0, 10)
const DURABLE = ['-c', 'fsync=on', '-c', 'synchronous_commit=on', '-c', 'full_page_writes=on']
// Citus's own default, as a user's cluster gets it (the test cluster has 4).
const SHARDS = ['-c', `citus.shard_count=${process.env.BENCH_CITUS_SHARDS ?? 32}`]
// The limits that would measure the gates instead of the databases are lifted.
const ENV = {
  SERVICE_API_RATE_LIMIT: '1000000000',
  SERVICE_TRACK_RATE_LIMIT: '1000000000',
  SERVICE_EXPENSIVE_PER_ACCOUNT: '16',
  SERVICE_MAX_PENDING_UPLOADS: '100000',
}

// An update of a seeded customer: today's metrics, changing from one round to the next.
const customer = (i: number, round: number) => ({
  external_id: `cust-${i}`,
  name: `Customer ${i}`,
  attributes: { country: ['US', 'DE', 'FR', 'GB'][i % 4], has_sso: (i + round) % 3 === 0 },
  metrics: [{ date: TODAY, logins: (i * 7 + round) % 50, seats: 1 + (i % 20), nps: round % 11 }],
})

const SEARCHES = [
  { filters: [{ propertyName: 'country', operator: 'EQ', value: 'DE' }], limit: 50 },
  { filters: [{ propertyName: 'engagementscore', operator: 'GTE', value: '60' }], limit: 50 },
  { sort: [{ propertyName: 'engagementscore', direction: 'desc' }], limit: 50 },
  { filters: [{ propertyName: 'name', operator: 'LIKE', value: '42' }], limit: 50 },
].map((body) => JSON.stringify(body))

interface Tenant {
  id: number
  token: string
  trackerKey: string
}

// One kind of request: `clients` closed loops; `send` makes the n-th request and returns its
// answer, which must be a 2xx.
interface Kind {
  name: string
  unit: string
  perRequest: number
  clients: number
  send: (base: string, tenant: Tenant, n: number) => Promise<Response>
}

const post = (url: string, headers: Record<string, string>, body: string) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })

const KINDS: Kind[] = [
  {
    name: 'uploads',
    unit: 'customers/s',
    perRequest: UPLOAD,
    clients: 2,
    send: (base, t, n) => {
      const first = (n * UPLOAD) % CUSTOMERS
      const customers = Array.from({ length: UPLOAD }, (_, i) =>
        customer((first + i) % CUSTOMERS, n),
      )
      return post(
        `${base}/api/v1/customers`,
        { 'service-key': t.token },
        JSON.stringify({ customers }),
      )
    },
  },
  {
    name: 'searches',
    unit: 'requests/s',
    perRequest: 1,
    clients: 4,
    send: (base, t, n) =>
      post(
        `${base}/api/v1/customers/search`,
        { 'service-key': t.token },
        SEARCHES[n % SEARCHES.length],
      ),
  },
  {
    name: 'tracking',
    unit: 'events/s',
    perRequest: EVENTS,
    clients: 2,
    send: (base, t, n) => {
      const events = Array.from({ length: EVENTS }, (_, i) => {
        const c = `cust-${(n * EVENTS + i) % CUSTOMERS}`
        return {
          name: ['page_view', 'login', 'feature_used'][i % 3],
          timestamp: Date.now() - i * 1000,
          identification: { customer: c, contact: `${c}-contact-${i % 3}` },
          data: { contact: { last_page: `/app/page/${i % 20}` } },
        }
      })
      return post(
        `${base}/api/tracker/track`,
        { 'service-key': t.token },
        JSON.stringify({ trackerKey: t.trackerKey, events }),
      )
    },
  },
  {
    name: 'This week',
    unit: 'requests/s',
    perRequest: 1,
    clients: 1,
    send: (base, t, n) =>
      fetch(`${base}/api/v1/insights/week?days=${n % 2 ? 30 : 7}`, {
        headers: { 'service-key': t.token },
      }),
  },
]

interface Measured {
  // Every request answered, warm-up included.
  answered: number
  latencies: number[]
  perSecond: number
  failures: number
  firstFailures: string[]
}

// All kinds at once for WARMUP + SECONDS; only the requests started after the warm-up count.
const load = async (base: string, tenants: Tenant[]) => {
  const started = performance.now()
  const counted = started + WARMUP * 1000
  const deadline = counted + SECONDS * 1000
  return Promise.all(
    KINDS.map(async (kind): Promise<Measured> => {
      const m: Measured = {
        answered: 0,
        latencies: [],
        perSecond: 0,
        failures: 0,
        firstFailures: [],
      }
      let next = 0
      await Promise.all(
        Array.from({ length: kind.clients }, async () => {
          while (performance.now() < deadline) {
            const n = next++
            const at = performance.now()
            const res = await kind.send(base, tenants[n % TENANTS], Math.floor(n / TENANTS))
            const text = await res.text()
            m.answered++
            if (at < counted) continue
            if (res.ok) m.latencies.push(performance.now() - at)
            else if (m.failures++ < 3) m.firstFailures.push(`${res.status} ${text.slice(0, 300)}`)
          }
        }),
      )
      m.latencies.sort((a, b) => a - b)
      m.perSecond = (m.latencies.length * kind.perRequest) / SECONDS
      return m
    }),
  )
}

// CPU seconds used so far by these processes and their children (a postmaster's backends, the
// service's), from /proc: what a side costs whatever else runs on the machine. USER_HZ is 100.
const cpuSeconds = (roots: number[]) => {
  let ticks = 0
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (roots.includes(Number(pid)) || roots.includes(Number(fields[1])))
        ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      /* gone meanwhile */
    }
  }
  return ticks / 100
}

const until = async (check: () => Promise<boolean>, what: string, seconds = 300) => {
  for (const deadline = performance.now() + seconds * 1000; !(await check()); ) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${seconds} s`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

// A tenant of bench/scoring's seed (customers `cust-<i>` with 12 monthly snapshots, by COPY),
// scored by its model, with a key and tracking.
const makeTenant = async (
  sql: Sql,
  server: Awaited<ReturnType<typeof startServer>>,
  n: number,
): Promise<Tenant> => {
  const id = await seed(sql, CUSTOMERS, `Tenant${n}`)
  await sql`insert into scoring_models (account_id, model) values (${id}, ${sql.json(model(40))})`
  await scoreRecords(sql, { account_id: id, entity: 'customer' })
  const account = await server.admin('PUT', `/accounts/${id}/tracking`, { domains: ['bench.test'] })
  const { token } = await server.admin('POST', `/accounts/${id}/keys`, {})
  return { id, token, trackerKey: account.tracker_key }
}

const side = async (url: string, postmasters: number[], env: Record<string, string> = {}) => {
  const sql = connect(url, { max: 2 })
  await migrate(sql, url)
  const server = await startServer(url, { ...ENV, ...env })
  try {
    const tenants: Tenant[] = []
    for (let n = 0; n < TENANTS; n++) tenants.push(await makeTenant(sql, server, n))
    await until(
      async () => (await sql`select count(*)::int as n from graphile_worker.jobs`)[0].n === 0,
      'the seeding jobs done',
    )
    await sql`vacuum analyze`
    const loadAverage = loadavg()[0]
    const statements = await oneStatement(sql, tenants[0].id)
    const searchAlone = await oneSearch(server.base, tenants[0])
    const roots = [...postmasters, server.pid]
    const cpuBefore = roots.map((r) => cpuSeconds([r]))
    const measured = await load(server.base, tenants)
    // Per process tree, in the order of roots: the nodes (the coordinator first), then the service.
    const cpuOf = roots.map((r, i) => cpuSeconds([r]) - cpuBefore[i])
    const cpu = cpuOf.reduce((a, b) => a + b, 0)
    const [{ pending }] =
      await sql`select count(*)::int as pending from uploads where status <> 'processed'`
    // What the worker could not do, as the service logged it: said, so that it is seen.
    const failing =
      await sql`select task_identifier as task, last_error as error from graphile_worker.jobs
      where last_error is not null`
    for (const { task, error } of failing)
      process.stderr.write(`bench citus: job ${task} failing: ${error}\n`)
    return {
      measured,
      loadAverage,
      pending: pending as number,
      failing: failing.length,
      statements,
      searchAlone,
      cpu,
      cpuOf,
    }
  } finally {
    await server.stop()
    await sql.end()
  }
}

// The routing of one statement, before the load (nothing else running): a point
// read and a point update by a tenant's key, one at a time, each a round trip of its own.
const oneStatement = async (sql: Sql, accountId: number) => {
  const timed = async (run: (i: number) => Promise<unknown>) => {
    const ms: number[] = []
    for (let i = 0; i < 300; i++) {
      const at = performance.now()
      await run(i)
      ms.push(performance.now() - at)
    }
    return percentile(
      ms.sort((a, b) => a - b),
      50,
    )
  }
  return {
    read: await timed(
      (i) =>
        sql`select name from customers where account_id = ${accountId}
          and external_id = ${`cust-${i}`}`,
    ),
    update: await timed(
      (i) =>
        sql`update customers set name = name where account_id = ${accountId}
          and external_id = ${`cust-${i}`}`,
    ),
  }
}

// A search alone, before the load: one client, the four shapes in turn, each request over HTTP
// after the last has answered. What a search costs without the queueing of the load:
// the p50 of 200.
const oneSearch = async (base: string, tenant: Tenant) => {
  const ms: number[] = []
  for (let n = 0; n < 220; n++) {
    const at = performance.now()
    const res = await KINDS[1].send(base, tenant, n)
    await res.text()
    if (!res.ok) throw new Error(`a search alone: ${res.status}`)
    if (n >= 20) ms.push(performance.now() - at)
  }
  return percentile(
    ms.sort((a, b) => a - b),
    50,
  )
}

// A database on the coordinator's server with no citus extension: a plain PostgreSQL 15.
const plainDatabase = async (serverUrl: string) => {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} })
  try {
    await admin`set citus.enable_ddl_propagation = off`
    await admin`create database single_bench`
  } finally {
    await admin.end()
  }
  const url = new URL(serverUrl)
  url.pathname = '/single_bench'
  return url.toString()
}

export default async (ctx: BenchContext) => {
  const missing = citusMissing()
  if (missing) {
    process.stderr.write(`bench citus skipped: ${missing}\n`)
    return
  }
  const cluster = await startCitusCluster(2, { settings: [...DURABLE, ...SHARDS] })
  const postmasters = cluster.nodes.map((n) =>
    Number(readFileSync(`${n.dataDir}/postmaster.pid`, 'utf8').split('\n')[0]),
  )
  try {
    // As in the test run's Citus pass: a request's statement that fans out over shards fails (a
    // failed request here), so that every figure is of router queries.
    const distributed = await side((await cluster.createDatabase('b')).url, postmasters, {
      SERVICE_DATABASE_API_OPTIONS: 'citus.multi_task_query_log_level=error',
    })
    const single = await side(await plainDatabase(cluster.coordinator.url), postmasters)
    for (const [name, s] of [
      ['single', single],
      ['cluster', distributed],
    ] as const) {
      ctx.report({
        bench: 'citus',
        metric: `load average (1 min) before the ${name}'s load`,
        value: s.loadAverage,
        unit: '',
      })
      ctx.report({
        bench: 'citus',
        metric: `uploads left unprocessed after the ${name}'s load`,
        value: s.pending,
        unit: '',
      })
      ctx.report({
        bench: 'citus',
        metric: `jobs failing after the ${name}'s load`,
        value: s.failing,
        unit: '',
      })
    }
    // All the kinds' requests together, over the whole load, warm-up included.
    const cpuPerRequest = (x: typeof single) =>
      (x.cpu * 1000) / x.measured.reduce((n, m) => n + m.answered, 0)
    ctx.report({
      bench: 'citus',
      metric: 'CPU of the service and all nodes, single: per request',
      value: cpuPerRequest(single),
      unit: 'ms',
    })
    ctx.report({
      bench: 'citus',
      metric: 'CPU of the service and all nodes, cluster: per request',
      value: cpuPerRequest(distributed),
      unit: 'ms',
      baseline: cpuPerRequest(single),
      ratio: cpuPerRequest(distributed) / cpuPerRequest(single),
    })
    for (const [name, x] of [
      ['single', single],
      ['cluster', distributed],
    ] as const)
      ctx.report({
        bench: 'citus',
        metric: `CPU of the service and all nodes, ${name}: cores busy`,
        value: x.cpu / (WARMUP + SECONDS),
        unit: 'cores',
      })
      // Where the cluster's CPU goes: what scales with workers and what stays on the coordinator.
    ;['coordinator', 'worker 1', 'worker 2', 'the service (serve)'].forEach((root, i) =>
      ctx.report({
        bench: 'citus',
        metric: `CPU per request, cluster: ${root}`,
        value:
          (distributed.cpuOf[i] * 1000) / distributed.measured.reduce((n, m) => n + m.answered, 0),
        unit: 'ms',
      }),
    )
    ctx.report({
      bench: 'citus',
      metric: 'CPU per request, single: the service (serve)',
      value: (single.cpuOf[3] * 1000) / single.measured.reduce((n, m) => n + m.answered, 0),
      unit: 'ms',
    })
    for (const [what, pick] of [
      ['a point read by key', (x: typeof single) => x.statements.read],
      ['a point update by key (its commit)', (x: typeof single) => x.statements.update],
    ] as const) {
      ctx.report({
        bench: 'citus',
        metric: `one statement, single: ${what}, p50`,
        value: pick(single),
        unit: 'ms',
      })
      ctx.report({
        bench: 'citus',
        metric: `one statement, cluster: ${what}, p50`,
        value: pick(distributed),
        unit: 'ms',
        baseline: pick(single),
        ratio: pick(distributed) / pick(single),
      })
    }
    ctx.report({
      bench: 'citus',
      metric: 'a search alone, single: p50',
      value: single.searchAlone,
      unit: 'ms',
    })
    ctx.report({
      bench: 'citus',
      metric: 'a search alone, cluster: p50',
      value: distributed.searchAlone,
      unit: 'ms',
      baseline: single.searchAlone,
      ratio: distributed.searchAlone / single.searchAlone,
    })
    KINDS.forEach((kind, k) => {
      const [a, b] = [single.measured[k], distributed.measured[k]]
      for (const [name, s] of [
        ['single', a],
        ['cluster', b],
      ] as const)
        if (s.failures) {
          ctx.report({
            bench: 'citus',
            metric: `${kind.name}, ${name}: failed requests`,
            value: s.failures,
            unit: '',
          })
          process.stderr.write(
            `bench citus: ${kind.name} on the ${name}: ${s.firstFailures.join('\n  ')}\n`,
          )
        }
      const row = (
        metric: string,
        unit: string,
        value: (m: Measured) => number,
        target?: string,
      ) => {
        ctx.report({
          bench: 'citus',
          metric: `${kind.name}, single: ${metric}`,
          value: value(a),
          unit,
        })
        ctx.report({
          bench: 'citus',
          metric: `${kind.name}, cluster: ${metric}`,
          value: value(b),
          unit,
          baseline: value(a),
          ratio: value(b) / value(a),
          target,
        })
      }
      row(`throughput, ${kind.clients} clients`, kind.unit, (m) => m.perSecond)
      row(
        'p50',
        'ms',
        (m) => percentile(m.latencies, 50),
        kind.name === 'searches' ? '<= 2 (issue 44)' : undefined,
      )
      row('p99', 'ms', (m) => percentile(m.latencies, 99))
    })
  } finally {
    await cluster.stop()
  }
}
