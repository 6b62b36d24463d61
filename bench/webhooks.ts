// customer.created delivery, with the service as its own process (`serve`, HTTP + worker):
// - latency from a single-customer upload's 200 to the webhook's arrival at a loopback receiver,
//   sequentially (p50/p99), beside a bare POST of the same size to the same receiver (the floor);
//   the single-record create (processed before its answer, so one job hop instead of two) too;
// - latency from an upload's 200 to the arrival of the customer.score_changed its scoring sends
//   (a new snapshot of one customer that moves its engagement, score alerts on every move);
// - fan-out: 50,000 new customers (50 uploads of 1000, 4 at a time) to 10 endpoints, the time until
//   every endpoint has every batch, beside the time until the last of those uploads was processed
//   (same run); every request's signature is checked with the standardwebhooks library and every
//   customer must arrive exactly once per endpoint.
import postgres from 'postgres'
import { startServer } from './server.ts'
import { percentile, type BenchContext } from './lib.ts'
import { startReceiver, type Receiver } from '../test/helpers/receiver.ts'
import { sendWebhook } from '../src/webhooks/send.ts'
import { Webhook } from 'standardwebhooks'

const SAMPLES = Number(process.env.BENCH_WEBHOOK_SAMPLES ?? 200)
// Each waits for the worker to be idle, about a second (docs/benchmarks.md, "Events").
const SCORING_SAMPLES = Number(process.env.BENCH_WEBHOOK_SCORING_SAMPLES ?? 100)
const CUSTOMERS = Number(process.env.BENCH_WEBHOOK_CUSTOMERS ?? 50_000)
const PER_REQUEST = 1000
const CONCURRENCY = 4
const ENDPOINTS = Number(process.env.BENCH_WEBHOOK_ENDPOINTS ?? 10)

type Server = Awaited<ReturnType<typeof startServer>>

const account = async (server: Server, name: string, hookUrls: string[] = []) => {
  const created = await server.admin('POST', '/accounts', { name })
  await server.admin('POST', `/accounts/${created.id}/properties`, {
    entity: 'customer',
    kind: 'metric',
    codename: 'logins',
    type: 'number',
  })
  await server.admin('PUT', `/accounts/${created.id}/scoring`, {
    customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 40 }] },
  })
  const secrets: string[] = []
  for (const url of hookUrls)
    secrets.push(
      (
        await server.admin('POST', `/accounts/${created.id}/webhooks`, {
          url,
          events: ['customer.created'],
        })
      ).secret,
    )
  const { token } = await server.admin('POST', `/accounts/${created.id}/keys`, {})
  return { id: created.id as number, token: token as string, secrets }
}

const post = async (server: Server, token: string, path: string, body: unknown) => {
  for (;;) {
    const res = await fetch(server.base + path, {
      method: 'POST',
      headers: { 'service-key': token, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    await res.arrayBuffer()
    if (res.status === 200 || res.status === 201) return performance.now()
    if (res.status !== 429) throw new Error(`${path} answered ${res.status}`)
    await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after') ?? 1) * 1000))
  }
}

const stats = (ms: number[]) => {
  const sorted = [...ms].sort((a, b) => a - b)
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) }
}

// Sequential: each sample waits for its own webhook before the next upload.
const latency = async (
  server: Server,
  r: Receiver,
  send: (i: number) => Promise<number>,
  samples = SAMPLES,
  idle?: () => Promise<unknown>,
) => {
  const ms: number[] = []
  for (let i = 0; i < samples; i++) {
    await idle?.()
    const answered = await send(i)
    await r.waitFor(i + 1)
    ms.push(r.requests[i].arrived - answered)
  }
  return stats(ms)
}

const floor = async (r: Receiver) => {
  const body = JSON.stringify({
    event: 'customer.created',
    timestamp: new Date().toISOString(),
    data: {
      source: 'API',
      customers: [
        { service_id: 1, external_id: 'x', name: 'x', created_at: new Date().toISOString() },
      ],
      batch: { current_batch: 1, total_batches: 1, total_customers: 1, batch_size: 1 },
    },
  })
  const ms: number[] = []
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now()
    await sendWebhook({ url: r.url, body, headers: {}, allowPrivate: true })
    ms.push(performance.now() - started)
  }
  return stats(ms)
}

const until = async (check: () => Promise<boolean>) => {
  while (!(await check())) await new Promise((r) => setTimeout(r, 20))
  return performance.now()
}

// Seconds from the first request until the last upload was processed and until every endpoint has
// every batch.
const bulk = async (
  server: Server,
  sql: postgres.Sql,
  account: { id: number; token: string },
  rs: Receiver[],
) => {
  const bodies = Array.from({ length: Math.ceil(CUSTOMERS / PER_REQUEST) }, (_, i) => ({
    customers: Array.from(
      { length: Math.min(PER_REQUEST, CUSTOMERS - i * PER_REQUEST) },
      (_, j) => ({
        external_id: `b-${i * PER_REQUEST + j}`,
        name: `Customer ${j}`,
      }),
    ),
  }))
  const started = performance.now()
  let next = 0
  const sender = async (): Promise<void> => {
    const body = bodies[next++]
    if (!body) return
    await post(server, account.token, '/api/v1/customers', body)
    return sender()
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, sender))
  const [processed] = await Promise.all([
    until(
      async () =>
        (
          await sql`select count(*)::int as n from uploads where account_id = ${account.id}
            and status <> 'processed'`
        )[0].n === 0,
    ),
    ...rs.map((r) => r.waitFor(bodies.length, 600_000)),
  ])
  const delivered = Math.max(...rs.map((r) => r.requests[bodies.length - 1].arrived))
  return { processed: (processed - started) / 1000, delivered: (delivered - started) / 1000 }
}

// Every request verifies under its endpoint's secret, and every customer came exactly once to each.
const verifyFanOut = (rs: Receiver[], secrets: string[]) =>
  rs.forEach((r, i) => {
    const hook = new Webhook(secrets[i].slice('whsec_'.length))
    const ids = r.requests.flatMap((req) => {
      hook.verify(req.raw, {
        'webhook-id': String(req.headers['webhook-id']),
        'webhook-timestamp': String(req.headers['webhook-timestamp']),
        'webhook-signature': String(req.headers['webhook-signature']),
      })
      return req.json.data.customers.map((c: { service_id: number }) => c.service_id)
    })
    if (ids.length !== CUSTOMERS || new Set(ids).size !== CUSTOMERS)
      throw new Error(`endpoint ${i}: ${ids.length} customers, ${new Set(ids).size} distinct`)
  })

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const server = await startServer(url, {
    SERVICE_WEBHOOK_ALLOW_PRIVATE: '1',
    SERVICE_API_RATE_LIMIT: '1000000',
    SERVICE_MAX_PENDING_UPLOADS: '1000',
  })
  const receivers: Receiver[] = []
  const receiver = async () => {
    const r = await startReceiver()
    receivers.push(r)
    return r
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const base = await floor(await receiver())

    const viaUpload = await receiver()
    const a = await account(server, 'Latency', [viaUpload.url])
    const upload = await latency(server, viaUpload, (i) =>
      post(server, a.token, '/api/v1/customers', {
        customers: [{ external_id: `u${i}`, name: `U ${i}` }],
      }),
    )
    // Where the time goes, from the server's clocks: the upload job's wait for a worker (its
    // transaction's start, which is also the delivery row's created_at), then the merge, the
    // delivery job's pickup and the POST up to the attempt's start.
    const phases = await sql`
      select extract(epoch from u.processed_at - u.received_at) * 1000 as queued,
             extract(epoch from t.at - d.created_at) * 1000 as to_send
      from (select received_at, processed_at, row_number() over (order by id) n from uploads
        where account_id = ${a.id}) u
      join (select id, created_at, row_number() over (order by id) n from webhook_deliveries
        where account_id = ${a.id}) d using (n)
      join webhook_attempts t on t.account_id = ${a.id} and t.delivery_id = d.id and t.attempt = 1`
    const queued = stats(phases.map((p) => Number(p.queued)))
    const toSend = stats(phases.map((p) => Number(p.to_send)))
    const viaCreate = await receiver()
    const b = await account(server, 'Create', [viaCreate.url])
    const create = await latency(server, viaCreate, (i) =>
      post(server, b.token, '/api/v1/customer', { external_id: `s${i}`, name: `S ${i}` }),
    )
    // One customer whose every new snapshot moves its engagement: upload, scoring, delivery.
    const viaScoring = await receiver()
    const c = await account(server, 'Scoring')
    await server.admin('PUT', `/accounts/${c.id}/score-alerts`, { engagementscore: { delta: 1 } })
    const day = (i: number) => new Date(Date.UTC(2026, 0, 1 + i)).toISOString().slice(0, 10)
    const snapshot = (i: number) => ({
      customers: [
        { external_id: 'moving', name: 'M', metrics: [{ date: day(i), logins: i % 2 ? 30 : 10 }] },
      ],
    })
    await post(server, c.token, '/api/v1/customers', snapshot(0))
    await until(
      async () =>
        (
          await sql`select count(*)::int as n from customer_contributions
            where account_id = ${c.id}`
        )[0].n === 1,
    )
    await server.admin('POST', `/accounts/${c.id}/webhooks`, {
      url: viaScoring.url,
      events: ['customer.score_changed'],
    })
    // Each sample starts with the worker idle, as the bar says: no job queued or running,
    // the account's ANALYZE and segment recomputation (due a second after a change) included.
    const idle = () =>
      until(async () => (await sql`select count(*)::int as n from graphile_worker.jobs`)[0].n === 0)
    const scoring = await latency(
      server,
      viaScoring,
      (i) => post(server, c.token, '/api/v1/customers', snapshot(i + 1)),
      SCORING_SAMPLES,
      idle,
    )

    // The latency runs' scoring jobs finish first, so that they do not count here.
    await until(
      async () =>
        (
          await sql`select count(*)::int as n from graphile_worker.jobs
            where attempts < max_attempts`
        )[0].n === 0,
    )
    const batches = Math.ceil(CUSTOMERS / PER_REQUEST)
    const endpoints = await Promise.all(Array.from({ length: ENDPOINTS }, receiver))
    const fanOut = await account(
      server,
      'Bulk',
      endpoints.map((r) => r.url),
    )
    const times = await bulk(server, sql, fanOut, endpoints)
    verifyFanOut(endpoints, fanOut.secrets)

    ctx.report({
      bench: 'webhooks',
      metric: `upload 200 -> webhook arrival p50 (${SAMPLES} sequential)`,
      value: upload.p50,
      unit: 'ms',
      baseline: base.p50,
      target: '< 100',
    })
    ctx.report({
      bench: 'webhooks',
      metric: 'upload 200 -> webhook arrival p99',
      value: upload.p99,
      unit: 'ms',
      baseline: base.p99,
      target: '< 100',
    })
    ctx.report({
      bench: 'webhooks',
      metric: '  of which upload job waits for a worker p50',
      value: queued.p50,
      unit: 'ms',
    })
    ctx.report({
      bench: 'webhooks',
      metric: '  of which merge, delivery pickup, send p50',
      value: toSend.p50,
      unit: 'ms',
    })
    ctx.report({
      bench: 'webhooks',
      metric: 'single create 201 -> webhook arrival p50',
      value: create.p50,
      unit: 'ms',
      baseline: base.p50,
    })
    ctx.report({
      bench: 'webhooks',
      metric: 'single create 201 -> webhook arrival p99',
      value: create.p99,
      unit: 'ms',
      baseline: base.p99,
    })
    ctx.report({
      bench: 'webhooks',
      metric: `upload 200 -> customer.score_changed arrival p50 (${SCORING_SAMPLES}, worker idle before)`,
      value: scoring.p50,
      unit: 'ms',
      baseline: base.p50,
    })
    ctx.report({
      bench: 'webhooks',
      metric: 'upload 200 -> customer.score_changed arrival p99',
      value: scoring.p99,
      unit: 'ms',
      baseline: base.p99,
      target: '< 100',
    })
    ctx.report({
      bench: 'webhooks',
      metric: `${CUSTOMERS} new customers x ${ENDPOINTS} endpoints: all ${batches * ENDPOINTS} delivered`,
      value: times.delivered,
      unit: 's',
      baseline: times.processed,
    })
    ctx.report({
      bench: 'webhooks',
      metric: 'events delivered per second (all endpoints)',
      value: (CUSTOMERS * ENDPOINTS) / times.delivered,
      unit: 'events/s',
    })
  } finally {
    await sql.end()
    await Promise.all(receivers.map((r) => r.close()))
    await server.stop()
  }
}
