// customer.created delivery, with the service as its own process (`serve`, HTTP + worker):
// - latency from a single-customer upload's 200 to the webhook's arrival at a loopback receiver,
//   sequentially (p50/p99), beside a bare POST of the same size to the same receiver (the floor);
//   the single-record create (processed before its answer, so one job hop instead of two) too;
// - the time for 50,000 new customers (50 uploads of 1000, 4 at a time) to have all their batches
//   delivered, beside the same uploads merely processed on an account without a webhook.
import postgres from 'postgres'
import { startServer } from './server.ts'
import { percentile, type BenchContext } from './lib.ts'
import { startReceiver, type Receiver } from '../test/helpers/receiver.ts'
import { sendWebhook } from '../src/webhooks/send.ts'

const SAMPLES = Number(process.env.BENCH_WEBHOOK_SAMPLES ?? 200)
const CUSTOMERS = Number(process.env.BENCH_WEBHOOK_CUSTOMERS ?? 50_000)
const PER_REQUEST = 1000
const CONCURRENCY = 4

type Server = Awaited<ReturnType<typeof startServer>>

const account = async (server: Server, name: string, hookUrl?: string) => {
  const created = await server.admin('POST', '/accounts', { name })
  await server.admin('POST', `/accounts/${created.id}/properties`, { entity: 'customer', kind: 'metric', codename: 'logins', type: 'number' })
  await server.admin('PUT', `/accounts/${created.id}/scoring`, { customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 40 }] } })
  if (hookUrl) await server.admin('POST', `/accounts/${created.id}/webhooks`, { url: hookUrl, events: ['customer.created'] })
  const { token } = await server.admin('POST', `/accounts/${created.id}/keys`, {})
  return { id: created.id as number, token: token as string }
}

const post = async (server: Server, token: string, path: string, body: unknown) => {
  for (;;) {
    const res = await fetch(server.base + path, { method: 'POST', headers: { 'service-key': token, 'content-type': 'application/json' }, body: JSON.stringify(body) })
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
const latency = async (server: Server, r: Receiver, send: (i: number) => Promise<number>) => {
  const ms: number[] = []
  for (let i = 0; i < SAMPLES; i++) {
    const answered = await send(i)
    await r.waitFor(i + 1)
    ms.push(r.requests[i].arrived - answered)
  }
  return stats(ms)
}

const floor = async (r: Receiver) => {
  const body = JSON.stringify({ event: 'customer.created', timestamp: new Date().toISOString(), data: { source: 'API', customers: [{ service_id: 1, external_id: 'x', name: 'x', created_at: new Date().toISOString() }], batch: { current_batch: 1, total_batches: 1, total_customers: 1, batch_size: 1 } } })
  const ms: number[] = []
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now()
    await sendWebhook({ url: r.url, body, headers: {}, allowPrivate: true })
    ms.push(performance.now() - started)
  }
  return stats(ms)
}

// From the first request to `done()`.
const bulk = async (server: Server, token: string, prefix: string, done: () => Promise<void>) => {
  const bodies = Array.from({ length: Math.ceil(CUSTOMERS / PER_REQUEST) }, (_, r) => ({
    customers: Array.from({ length: Math.min(PER_REQUEST, CUSTOMERS - r * PER_REQUEST) }, (_, j) => ({ external_id: `${prefix}-${r * PER_REQUEST + j}`, name: `Customer ${j}` })),
  }))
  const started = performance.now()
  let next = 0
  const sender = async (): Promise<void> => {
    const body = bodies[next++]
    if (!body) return
    await post(server, token, '/api/v1/customers', body)
    return sender()
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, sender))
  await done()
  return (performance.now() - started) / 1000
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const server = await startServer(url, { SERVICE_WEBHOOK_ALLOW_PRIVATE: '1', SERVICE_API_RATE_LIMIT: '1000000', SERVICE_MAX_PENDING_UPLOADS: '1000' })
  const receivers: Receiver[] = []
  const receiver = async () => { const r = await startReceiver(); receivers.push(r); return r }
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const base = await floor(await receiver())

    const viaUpload = await receiver()
    const a = await account(server, 'Latency', viaUpload.url)
    const upload = await latency(server, viaUpload, (i) => post(server, a.token, '/api/v1/customers', { customers: [{ external_id: `u${i}`, name: `U ${i}` }] }))
    const viaCreate = await receiver()
    const b = await account(server, 'Create', viaCreate.url)
    const create = await latency(server, viaCreate, (i) => post(server, b.token, '/api/v1/customer', { external_id: `s${i}`, name: `S ${i}` }))

    const batches = Math.ceil(CUSTOMERS / PER_REQUEST)
    const plain = await account(server, 'Plain')
    const processedOnly = await bulk(server, plain.token, 'p', async () => {
      for (;;) {
        const [{ n }] = await sql`select count(*)::int as n from uploads where account_id = ${plain.id} and status <> 'processed'`
        if (n === 0) return
        await new Promise((r) => setTimeout(r, 20))
      }
    })
    const bulkReceiver = await receiver()
    const hooked = await account(server, 'Bulk', bulkReceiver.url)
    const delivered = await bulk(server, hooked.token, 'w', () => bulkReceiver.waitFor(batches, 600_000))
    const ids = new Set(bulkReceiver.requests.flatMap((req) => req.json.data.customers.map((c: { service_id: number }) => c.service_id)))
    if (ids.size !== CUSTOMERS) throw new Error(`${ids.size} distinct customers delivered`)

    ctx.report({ bench: 'webhooks', metric: `upload 200 -> webhook arrival p50 (${SAMPLES} sequential)`, value: upload.p50, unit: 'ms', baseline: base.p50, target: '< 100' })
    ctx.report({ bench: 'webhooks', metric: 'upload 200 -> webhook arrival p99', value: upload.p99, unit: 'ms', baseline: base.p99 })
    ctx.report({ bench: 'webhooks', metric: 'single create 201 -> webhook arrival p50', value: create.p50, unit: 'ms', baseline: base.p50 })
    ctx.report({ bench: 'webhooks', metric: 'single create 201 -> webhook arrival p99', value: create.p99, unit: 'ms', baseline: base.p99 })
    ctx.report({ bench: 'webhooks', metric: `${CUSTOMERS} new customers: all ${batches} batches delivered`, value: delivered, unit: 's', baseline: processedOnly })
    ctx.report({ bench: 'webhooks', metric: 'customers delivered per second', value: CUSTOMERS / delivered, unit: 'customers/s' })
  } finally {
    await sql.end()
    await Promise.all(receivers.map((r) => r.close()))
    await server.stop()
  }
}
