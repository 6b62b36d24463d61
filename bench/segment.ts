// Segment ingest: POST /v1/batch with batches of 100 typical messages (mostly tracks, some identifies
// and groups, each with a messageId of its own) from 16 concurrent clients, against the tracker's own
// intake (POST /api/tracker/track, 100 events a request) of the same service in the same run.
// The apply lag is each message's own: from the 200 of the request that carried it to the first poll
// (every 100 ms) that sees it decided by the Segment apply job (applied, or parked or dropped as the
// mapping says), whose tracks are stored as events already applied. It is taken twice: at full intake
// (the clients as fast as they can), then with the requests paced to the bar's rate, 0.8 of the
// tracker's events per second, where the issue sets its bar (< 5 s); max and p95 of every message.
import autocannon from 'autocannon'
import { connect } from '../src/db/client.ts'
import { waitingSql } from '../src/tracking/cursor.ts'
import { startServer, startWorker } from './server.ts'
import { type BenchContext, percentile } from './lib.ts'

const SECONDS = Number(process.env.BENCH_SEGMENT_SECONDS ?? 10)
const CONNECTIONS = 16
// autocannon paces each connection to overallRate / connections a second, one request at a time: at 16
// connections a request slower than 100 ms kept the paced load under its rate (0.58 of it in one run).
const PACED_CONNECTIONS = 64
const MESSAGES = 100
const CUSTOMERS = 1000
const NAMES = ['page_view', 'login', 'feature_used', 'export', 'invite_sent']

// Eight bodies each, cycled; `@@` in a Segment body becomes the request's number, so that every
// message is new (a repeated messageId would be deduplicated, not applied).
const segmentBodies = () =>
  Array.from({ length: 8 }, (_, b) =>
    JSON.stringify({
      sentAt: '@@SENT',
      batch: Array.from({ length: MESSAGES }, (_, i) => {
        const n = b * MESSAGES + i
        const customer = `cust-${n % CUSTOMERS}`
        const userId = `${customer}-contact-${n % 3}`
        const common = { messageId: `m-@@-${i}`, userId, timestamp: '@@SENT', context: { library: { name: 'bench' } } }
        if (n % 10 === 0)
          return { ...common, type: 'group', groupId: customer, traits: { name: `Customer ${n}`, plan: 'pro' } }
        if (n % 10 === 1) return { ...common, type: 'identify', traits: { name: `Person ${n % 3}`, role: 'member' } }
        return {
          ...common,
          type: 'track',
          event: NAMES[n % NAMES.length],
          properties: { page: `/app/page/${n % 50}`, plan: 'pro' },
          context: { groupId: customer },
        }
      }),
    }),
  )

const trackerBodies = (trackerKey: string) =>
  Array.from({ length: 8 }, (_, b) =>
    JSON.stringify({
      trackerKey,
      events: Array.from({ length: MESSAGES }, (_, i) => {
        const n = b * MESSAGES + i
        const customer = `cust-${n % CUSTOMERS}`
        return {
          name: NAMES[n % NAMES.length],
          timestamp: Date.now() - n * 1000,
          identification: { customer, contact: `${customer}-contact-${n % 3}` },
          data: { contact: { last_page: `/app/page/${n % 50}` } },
        }
      }),
    }),
  )

let sent = 0
// When each request (its number, `@@` in its messages' ids) was answered 200.
const answered = new Map<number, number>()
const load = (url: string, headers: Record<string, string>, bodies: string[], duration: number, rate?: number) =>
  autocannon({
    url,
    ...(rate ? { overallRate: rate } : {}),
    method: 'POST',
    connections: rate ? PACED_CONNECTIONS : CONNECTIONS,
    duration,
    headers: { 'content-type': 'application/json', ...headers },
    requests: bodies.map((body) => ({
      method: 'POST',
      setupRequest: (req, context: { n?: number }) => {
        const now = new Date().toISOString()
        context.n = sent++
        return { ...req, body: body.replaceAll('@@SENT', now).replaceAll('@@', String(context.n)) }
      },
      // Called before the connection's next request is set up, so `n` is still this request's.
      onResponse: (status: number, _body: string, context: { n?: number }) => {
        if (status === 200) answered.set(context.n as number, performance.now())
      },
    })),
  })

const checked = (result: autocannon.Result) => {
  if (result.non2xx || result.errors || result.timeouts)
    throw new Error(`${result.url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`)
  return result
}

const perSecond = async (url: string, headers: Record<string, string>, bodies: string[], during = () => {}) => {
  checked(await load(url, headers, bodies, 2)) // warm-up
  during()
  const result = checked(await load(url, headers, bodies, SECONDS))
  return { messages: (result.requests.total * MESSAGES) / SECONDS, p99: result.latency.p99 }
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  // As deployed at scale (docs/operations.md): HTTP (`serve --no-worker`) and the `worker` apart. In one
  // `serve` the apply job's statements wait behind the intake's requests on one event loop, and it applied
  // a fifth of its rate alone while the load ran (docs/benchmarks.md); BENCH_SEGMENT_ONE_PROCESS=1 runs so.
  const oneProcess = process.env.BENCH_SEGMENT_ONE_PROCESS === '1'
  const server = await startServer(url, { SERVICE_TRACK_RATE_LIMIT: '100000000' }, oneProcess ? [] : ['--no-worker'])
  const worker = oneProcess ? null : startWorker(url)
  const shape = oneProcess ? ', one process' : ''
  const sql = connect(url, { max: 2 })
  try {
    const account = await server.admin('POST', '/accounts', { name: 'Bench' })
    await server.admin('PUT', `/accounts/${account.id}/tracking`, { domains: ['bench.test'] })
    for (const [entity, codename] of [
      ['customer', 'plan'],
      ['contact', 'role'],
    ])
      await server.admin('POST', `/accounts/${account.id}/properties`, {
        entity,
        kind: 'attribute',
        codename,
        type: 'string',
      })
    await sql`
      insert into customers (account_id, external_id, name)
      select ${account.id}, 'cust-' || i, 'Customer ' || i from generate_series(0, ${CUSTOMERS - 1}) i`
    await sql`analyze customers`
    const { token } = await server.admin('POST', `/accounts/${account.id}/keys`, { scopes: ['track'] })

    const tracker = await perSecond(
      `${server.base}/api/tracker/track`,
      { 'service-key': token },
      trackerBodies(account.tracker_key),
    )
    // The tracker's backlog is drained before the Segment load, so that the lag measured is Segment's.
    const trackerLeft = waitingSql(sql, 'tracking_events', account.id)
    while ((await sql`select 1 from (${trackerLeft}) w limit 1`).length) await new Promise((r) => setTimeout(r, 200))

    const segmentLeft = waitingSql(sql, 'segment_messages', account.id)
    // Every 100 ms: when the poll's snapshot was taken, and the smallest id it saw still undecided (every
    // message it saw below that was decided). A message is seen decided by the first poll taken after
    // its 200 whose frontier is past its id: a row committed after a poll is judged by later polls only.
    const polling = () => {
      let running = true
      const polls: { at: number; frontier: number }[] = []
      const poll = async () => {
        const at = performance.now()
        const [{ frontier }] = await sql`
          select coalesce((select min(id) from (${segmentLeft}) w), 9007199254740991) as frontier`
        polls.push({ at, frontier: Number(frontier) })
      }
      const done = (async () => {
        while (running) {
          await poll()
          await new Promise((r) => setTimeout(r, 100))
        }
      })()
      // Stopped once drained: a last poll sees the last messages decided.
      return async () => {
        running = false
        await done
        await poll()
        return polls
      }
    }
    const drained = async () => {
      const started = performance.now()
      while ((await sql`select 1 from (${segmentLeft}) w limit 1`).length) await new Promise((r) => setTimeout(r, 100))
      return (performance.now() - started) / 1000
    }
    // The lag of every message of the requests answered from `first` on, in seconds: max and p95.
    const lags = async (first: number, polls: { at: number; frontier: number }[]) => {
      const rows = await sql`
        select id, split_part(message_id, '-', 2)::int as n from segment_messages
        where account_id = ${account.id} and message_id like 'm-%' and split_part(message_id, '-', 2)::int >= ${first}`
      const all: number[] = []
      for (const { id, n } of rows) {
        const at = answered.get(n)
        if (at === undefined) continue
        let p = polls.findIndex((poll) => poll.at >= at)
        while (p >= 0 && p < polls.length && polls[p].frontier <= id) p++
        if (p < 0 || p === polls.length) throw new Error(`message ${id} was never seen decided`)
        all.push((polls[p].at - at) / 1000)
      }
      all.sort((a, b) => a - b)
      return { max: all[all.length - 1], p95: percentile(all, 95), messages: all.length }
    }
    const basic = `Basic ${Buffer.from(`${token}:`).toString('base64')}`
    const batchUrl = `${server.base}/v1/batch`
    let stopFull = async () => [] as { at: number; frontier: number }[]
    let fullFirst = 0
    const segment = await perSecond(batchUrl, { authorization: basic }, segmentBodies(), () => {
      fullFirst = sent
      stopFull = polling()
    })
    const drain = await drained()
    const fullLag = await lags(fullFirst, await stopFull())
    // The lag bar is at the bar's rate: requests paced to 0.8 of the tracker's events per second.
    const rate = Math.round((0.8 * tracker.messages) / MESSAGES)
    const pacedFirst = sent
    const stopPaced = polling()
    const paced = checked(await load(batchUrl, { authorization: basic }, segmentBodies(), SECONDS, rate))
    // What the apply job kept up with while the paced load ran, and how fast it drained the rest alone.
    const [{ left }] = await sql`select count(*)::int as left ${segmentLeft}`
    const pacedDrain = await drained()
    const pacedLag = await lags(pacedFirst, await stopPaced())
    const [{ stored }] =
      await sql`select count(*)::int as stored from segment_messages where account_id = ${account.id}`

    ctx.report({
      bench: 'segment',
      metric: `POST /api/tracker/track, ${MESSAGES} events x ${CONNECTIONS} clients${shape}`,
      value: tracker.messages,
      unit: 'events/s',
    })
    ctx.report({
      bench: 'segment',
      metric: `POST /v1/batch, ${MESSAGES} messages x ${CONNECTIONS} clients`,
      value: segment.messages,
      unit: 'msgs/s',
      baseline: tracker.messages,
      ratio: segment.messages / tracker.messages,
      target: '>= 0.8',
    })
    ctx.report({ bench: 'segment', metric: 'p99 latency, tracker', value: tracker.p99, unit: 'ms' })
    ctx.report({ bench: 'segment', metric: 'p99 latency, /v1/batch', value: segment.p99, unit: 'ms' })
    ctx.report({ bench: 'segment', metric: 'apply lag at full intake, max', value: fullLag.max, unit: 's' })
    ctx.report({ bench: 'segment', metric: 'apply lag at full intake, p95', value: fullLag.p95, unit: 's' })
    ctx.report({ bench: 'segment', metric: 'backlog drained after full intake', value: drain, unit: 's' })
    ctx.report({
      bench: 'segment',
      metric: 'POST /v1/batch paced to 0.8 x tracker',
      value: (paced.requests.total * MESSAGES) / SECONDS,
      unit: 'msgs/s',
      baseline: rate * MESSAGES,
      ratio: (paced.requests.total * MESSAGES) / SECONDS / (rate * MESSAGES),
    })
    ctx.report({
      bench: 'segment',
      metric: 'apply lag at 0.8 x tracker, max',
      value: pacedLag.max,
      unit: 's',
      target: '< 5',
    })
    ctx.report({ bench: 'segment', metric: 'apply lag at 0.8 x tracker, p95', value: pacedLag.p95, unit: 's' })
    ctx.report({ bench: 'segment', metric: 'backlog drained after paced load', value: pacedDrain, unit: 's' })
    ctx.report({
      bench: 'segment',
      metric: 'apply rate while the paced load ran',
      value: (paced.requests.total * MESSAGES - left) / SECONDS,
      unit: 'msgs/s',
      baseline: (paced.requests.total * MESSAGES) / SECONDS,
      ratio: (paced.requests.total * MESSAGES - left) / (paced.requests.total * MESSAGES),
    })
    ctx.report({
      bench: 'segment',
      metric: 'apply rate draining alone after it',
      value: left / pacedDrain,
      unit: 'msgs/s',
    })
    ctx.report({ bench: 'segment', metric: 'messages stored (warm-up included)', value: stored, unit: 'msgs' })
  } finally {
    await sql.end()
    await worker?.stop()
    await server.stop()
  }
}
