// A noisy neighbour (issue 30). Account B runs a small mix (point reads, simple searches, small
// uploads), alone and then while account A sends the costly shapes a valid request can take, from
// more clients than the service's pool has connections, for ATTACK_S seconds. Reported: B's p50 and
// p99 in both phases, whether PostgreSQL restarted, the peak memory of the largest backend and of
// `serve`, A's answers by status (a refusal, by whichever status, is counted, never fatal), and how
// far A's longest request ran past its budget.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { setPriority } from 'node:os'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { percentile, type BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'
import { startServer } from './server.ts'

const A_CUSTOMERS = Number(process.env.BENCH_NOISY_CUSTOMERS ?? 20_000)
const B_CUSTOMERS = 2000
const ALONE_S = 20
const ATTACK_S = 30
// A's requests still running this long after the attack are cut by the bench, which then cancels
// their statements, so that the bench ends; they count as past their budget.
const GRACE_S = 15
const B_CLIENTS = 2
// More than the 20 connections of `serve`'s pool.
const A_CLIENTS = 30
// The statement budget of an expensive request, as the service is configured by default.
const BUDGET_MS = Number(process.env.BENCH_NOISY_BUDGET_MS ?? 5000)
// The machine is shared: a backend past this much private memory is cancelled by the bench (and
// counted) before the kernel's OOM killer takes PostgreSQL down for everyone on it.
const GUARD_MB = 1024

const random = (n: number) =>
  Array.from({ length: n }, () => Math.random().toString(36).slice(2, 10)).join('')

// The costly shapes, each within the documented limits: 50 leaves of 20 values (1,000 values), LIKE
// over long values, an exact count, and an aggregate of many fields with the most buckets.
const SHAPES: { name: string; path: string; body: () => object }[] = [
  {
    name: 'IN tree (50 leaves x 20 values on an attribute)',
    path: '/api/v1/customers/search',
    body: () => ({
      where: {
        or: Array.from({ length: 50 }, () => ({
          propertyName: 'country',
          operator: 'IN',
          values: Array.from({ length: 20 }, () => random(2)),
        })),
      },
      limit: 100,
    }),
  },
  {
    name: 'LIKE tree (50 leaves of 200 characters)',
    path: '/api/v1/customers/search',
    body: () => ({
      where: {
        or: Array.from({ length: 50 }, (_, i) => ({
          propertyName: i % 2 ? 'name' : 'country',
          operator: 'LIKE',
          value: random(25),
        })),
      },
      limit: 100,
    }),
  },
  {
    name: 'count exact',
    path: '/api/v1/customers/search',
    body: () => ({
      filters: [{ propertyName: 'country', operator: 'NEQ', value: random(1) }],
      count: 'exact',
    }),
  },
  {
    name: 'wide aggregate (7 fields x 100 buckets, grid)',
    path: '/api/v1/customers/aggregate',
    body: () => ({
      fields: ['engagementscore', 'fitscore', 'logins', 'seats', 'tickets', 'api_calls', 'nps'],
      buckets: 100,
      matrix: 'grid',
    }),
  },
]

type Server = Awaited<ReturnType<typeof startServer>>

const keyOf = async (server: Server, accountId: number) =>
  (await server.admin('POST', `/accounts/${accountId}/keys`, {})).token as string

// One request; its status (or 'error' when the connection failed, 'cut' when the bench aborted it)
// and its time.
const send = async (
  base: string,
  key: string,
  method: string,
  path: string,
  body?: object,
  signal?: AbortSignal,
) => {
  const started = performance.now()
  let status: number | string
  try {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'service-key': key, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    })
    await res.arrayBuffer()
    status = res.status
  } catch (err) {
    status = signal?.aborted ? 'cut' : 'error'
    if (status === 'error')
      process.stderr.write(`noisy: ${method} ${path}: ${(err as Error).message}\n`)
  }
  return { status, ms: performance.now() - started }
}

// B's mix, from B_CLIENTS clients until `until`: each round a point read, a simple search, a point
// read, a search and an upload of five customers; as a client sends one upload at a time, an upload
// still waiting to be processed is asked for its status instead of sending the next.
const mixOfB = (base: string, key: string) => {
  let waiting: number | undefined
  const small = () => ({
    customers: Array.from({ length: 5 }, (_, i) => ({
      external_id: `small-${random(1)}-${i}`,
      name: `Small ${i}`,
      attributes: { country: 'DE' },
    })),
  })
  const uploadOrStatus = async () => {
    const started = performance.now()
    const res = await fetch(
      `${base}/api/v1/${waiting === undefined ? 'customers' : `uploads/${waiting}`}`,
      {
        method: waiting === undefined ? 'POST' : 'GET',
        headers: { 'service-key': key, 'content-type': 'application/json' },
        body: waiting === undefined ? JSON.stringify(small()) : undefined,
      },
    ).catch(() => undefined)
    const body = res?.ok ? await res.json() : await res?.arrayBuffer()
    if (res?.ok)
      waiting = ['processed', 'failed'].includes(body.status) ? undefined : body.upload_id
    return { status: res?.status ?? 'error', ms: performance.now() - started }
  }
  const round = [
    () =>
      send(base, key, 'GET', `/api/v1/customer/cust-${Math.floor(Math.random() * B_CUSTOMERS)}`),
    () =>
      send(base, key, 'POST', '/api/v1/customers/search', {
        filters: [{ propertyName: 'country', operator: 'EQ', value: 'DE' }],
        limit: 20,
      }),
    () =>
      send(base, key, 'GET', `/api/v1/customer/cust-${Math.floor(Math.random() * B_CUSTOMERS)}`),
    () => send(base, key, 'POST', '/api/v1/customers/search', { limit: 20 }),
    uploadOrStatus,
  ]
  return async (seconds: number) => {
    const until = performance.now() + seconds * 1000
    const times: number[] = []
    const failed = new Map<string, number>()
    await Promise.all(
      Array.from({ length: B_CLIENTS }, async () => {
        for (let i = 0; performance.now() < until; i++) {
          const { status, ms } = await round[i % round.length]()
          if (typeof status === 'number' && status < 300) times.push(ms)
          else failed.set(String(status), (failed.get(String(status)) ?? 0) + 1)
        }
      }),
    )
    return { sorted: times.sort((a, b) => a - b), failed }
  }
}

// A's attack: A_CLIENTS clients sending the shapes in turn for ATTACK_S seconds; what is still
// running GRACE_S later is cut.
const attackOfA = async (base: string, key: string) => {
  const cut = new AbortController()
  const until = performance.now() + ATTACK_S * 1000
  const timer = setTimeout(() => cut.abort(), (ATTACK_S + GRACE_S) * 1000)
  const answers: Answer[] = []
  await Promise.all(
    Array.from({ length: A_CLIENTS }, async (_, client) => {
      for (let i = client; performance.now() < until; i++) {
        const shape = SHAPES[i % SHAPES.length]
        answers.push({
          shape: shape.name,
          ...(await send(base, key, 'POST', shape.path, shape.body(), cut.signal)),
        })
      }
    }),
  )
  clearTimeout(timer)
  return answers
}

// A's clients run in a process of their own at the lowest CPU priority (the bench runs this file
// again with BENCH_NOISY_ATTACK set): on a deployment an attacker's clients do not run on the
// service's cores, and on this 2-core machine their own work (30 clients building and sending
// requests as fast as they are answered) would take a share of the cores that no defence of the
// service could win back. The service's own work for A (serve, PostgreSQL) keeps its priority.
type Answer = { shape: string; status: number | string; ms: number }
const attackFromAnotherProcess = (base: string, key: string) =>
  new Promise<Answer[]>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/noisy.ts'], {
      env: { ...process.env, BENCH_NOISY_ATTACK: JSON.stringify({ base, key }) },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    setPriority(child.pid!, 19)
    const out: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk))
    child.on('error', reject)
    child.on('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(Buffer.concat(out).toString()))
        : reject(new Error(`attacker exited ${code}`)),
    )
  })

if (process.env.BENCH_NOISY_ATTACK) {
  const { base, key } = JSON.parse(process.env.BENCH_NOISY_ATTACK)
  process.stdout.write(JSON.stringify(await attackOfA(base, key)))
}

const status = (pid: number) => {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)?.[1] ?? NaN)
    return { anon: kb('RssAnon') / 1024, hwm: kb('VmHWM') / 1024 }
  } catch {
    return undefined // gone
  }
}

// Samples every backend of the cluster and `serve` every 100 ms: the peak private memory (RssAnon)
// of any backend, which is what a query's work costs (RSS also counts the shared buffers a backend
// has touched, up to shared_buffers), its peak RSS (VmHWM), and the peak RSS of serve. A backend
// past GUARD_MB is cancelled.
const sampleMemory = (sql: Sql, server: Server) => {
  const peak = { anon: 0, hwm: 0, serve: 0, guarded: 0 }
  let running = true
  const done = (async () => {
    while (running) {
      try {
        const pids = await sql`select pid from pg_stat_activity
            where backend_type in ('client backend', 'parallel worker')`
        for (const { pid } of pids) {
          const s = status(pid)
          // Gone, or a backend exiting (its status no longer lists its memory).
          if (!s || Number.isNaN(s.anon)) continue
          peak.anon = Math.max(peak.anon, s.anon)
          peak.hwm = Math.max(peak.hwm, s.hwm)
          if (s.anon > GUARD_MB) {
            peak.guarded++
            await sql`select pg_cancel_backend(${pid})`
          }
        }
      } catch {
        /* PostgreSQL restarting: its start time tells */
      }
      peak.serve = Math.max(peak.serve, status(server.pid)?.hwm ?? 0)
      await new Promise((r) => setTimeout(r, 100))
    }
  })()
  return {
    stop: async () => {
      running = false
      await done
      return peak
    },
  }
}

const startedAt = async (sql: Sql) => {
  for (let i = 0; ; i++) {
    try {
      const [{ at }] = await sql`select pg_postmaster_start_time()::text as at`
      return at as string
    } catch (err) {
      if (i > 100) throw err
      await new Promise((r) => setTimeout(r, 200))
    }
  }
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const sql = connect(url)
  let server: Server | undefined
  try {
    await migrate(sql, url)
    const a = await seed(sql, A_CUSTOMERS, 'NoisyA')
    const b = await seed(sql, B_CUSTOMERS, 'QuietB')
    // Uploads need a scoring model.
    for (const id of [a, b]) {
      await sql`insert into scoring_models (account_id, model)
        values (${id}, ${sql.json(model(40))})`
    }
    await sql`vacuum analyze`
    // Without the per-key rate limit, which B's mix alone would pass, and which would turn A away
    // before any of the defences under test.
    server = await startServer(url, { SERVICE_API_RATE_LIMIT: '1000000000' })
    const [keyA, keyB] = [await keyOf(server, a), await keyOf(server, b)]
    const mix = mixOfB(server.base, keyB)
    const before = await startedAt(sql)
    await mix(2)
    const alone = await mix(ALONE_S)
    const memory = sampleMemory(sql, server)
    const [answers, attacked] = await Promise.all([
      attackFromAnotherProcess(server.base, keyA),
      mix(ATTACK_S),
    ])
    const [{ cancelled }] = await sql`
      select count(pg_cancel_backend(pid))::int as cancelled from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and state = 'active'`
    const peak = await memory.stop()
    const after = await startedAt(sql)

    const row = (metric: string, value: number, unit: string, extra: object = {}) =>
      ctx.report({ bench: 'noisy', metric, value, unit, ...extra })
    for (const p of [50, 99]) {
      const [quiet, loud] = [percentile(alone.sorted, p), percentile(attacked.sorted, p)]
      row(`B's mix p${p}: under attack, against alone`, loud, 'ms', {
        baseline: quiet,
        ratio: loud / quiet,
        target: p === 99 ? '<= 2' : undefined,
      })
    }
    row(
      `B's requests answered: alone ${alone.sorted.length}, under attack`,
      attacked.sorted.length,
      'requests',
    )
    for (const [phase, { failed }] of Object.entries({ alone, 'under attack': attacked })) {
      const statuses = [...failed].map(([status, n]) => `${status}: ${n}`).join(', ') || 'none'
      const n = [...failed.values()].reduce((sum, x) => sum + x, 0)
      row(`B's requests failed ${phase} (${statuses})`, n, 'requests', { target: '0' })
    }
    row('PostgreSQL restarts (pg_postmaster_start_time changed)', before === after ? 0 : 1, '', {
      target: '0',
    })
    row('largest backend: peak private memory (RssAnon)', peak.anon, 'MB', { target: '<= 256' })
    row('largest backend: peak RSS (VmHWM, with shared buffers)', peak.hwm, 'MB')
    row(`backends cancelled by the bench's ${GUARD_MB} MB guard`, peak.guarded, '', { target: '0' })
    row('serve: peak RSS (VmHWM)', peak.serve, 'MB')
    const byStatus = new Map<string, number>()
    for (const { status } of answers)
      byStatus.set(String(status), (byStatus.get(String(status)) ?? 0) + 1)
    row(`A's requests sent (${A_CLIENTS} clients, ${ATTACK_S} s)`, answers.length, 'requests')
    for (const [status, n] of [...byStatus].sort())
      row(`A's requests answered ${status}`, n, 'requests')
    row(
      `A's requests refused (4xx, 503)`,
      answers.filter((x) => /^(4|503)/.test(String(x.status))).length,
      'requests',
    )
    for (const shape of SHAPES) {
      const times = answers
        .filter((x) => x.shape === shape.name)
        .map((x) => x.ms)
        .sort((x, y) => x - y)
      row(`A: ${shape.name}, p50 (${times.length} sent)`, percentile(times, 50), 'ms')
    }
    const longest = Math.max(...answers.map((x) => x.ms))
    row(
      `A's longest request past its budget of ${BUDGET_MS / 1000} s`,
      Math.max(0, longest - BUDGET_MS) / 1000,
      's',
      {
        baseline: longest / 1000,
        target: '<= 1',
      },
    )
    row("A's statements still running after the grace, cancelled by the bench", cancelled, '', {
      target: '0',
    })
  } finally {
    await server?.stop()
    await sql.end()
  }
}
