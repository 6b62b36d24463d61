// Segment ingest: POST /v1/batch with batches of 100 typical messages (mostly tracks, some identifies
// and groups, each with a messageId of its own) from 16 concurrent clients, against the tracker's own
// intake (POST /api/tracker/track, 100 events a request) of the same service in the same run. While
// the Segment load runs, the apply lag is sampled every half second: the age of the oldest message
// the Segment apply job has not taken yet, plus that of the oldest tracked event still waiting for the
// tracker's apply job (the Segment apply now stores its tracks applied). The lag is measured twice: at
// full intake (the clients as fast as they can), then with the requests paced to the bar's rate, 0.8
// of the tracker's events per second, where the issue sets its bar (< 5 s).
import autocannon from 'autocannon'
import postgres from 'postgres'
import { startServer } from './server.ts'
import type { BenchContext } from './lib.ts'

const SECONDS = Number(process.env.BENCH_SEGMENT_SECONDS ?? 10)
const CONNECTIONS = 16
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
const load = (url: string, headers: Record<string, string>, bodies: string[], duration: number, rate?: number) =>
  autocannon({
    url,
    ...(rate ? { overallRate: rate } : {}),
    method: 'POST',
    connections: CONNECTIONS,
    duration,
    headers: { 'content-type': 'application/json', ...headers },
    requests: bodies.map((body) => ({
      method: 'POST',
      setupRequest: (req) => {
        const now = new Date().toISOString()
        return { ...req, body: body.replaceAll('@@SENT', now).replaceAll('@@', String(sent++)) }
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
  const server = await startServer(url, { SERVICE_TRACK_RATE_LIMIT: '100000000' })
  const sql = postgres(url, { max: 2, onnotice: () => {} })
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
    const trackerLeft = sql`from tracking_events where account_id = ${account.id}
      and id >= coalesce((select applied_below from tracking_cursors where account_id = ${account.id}), 0)
      and status = 'received'`
    while ((await sql`select 1 ${trackerLeft} limit 1`).length) await new Promise((r) => setTimeout(r, 200))

    // As the apply jobs read them: 'received' at or past the account's cursor (tracking/cursor.ts).
    const segmentLeft = sql`from segment_messages where account_id = ${account.id}
      and id >= coalesce((select applied_below from segment_cursors where account_id = ${account.id}), 0)
      and status = 'received'`
    const sampling = () => {
      let running = true
      const lags: number[] = []
      const done = (async () => {
        while (running) {
          const [{ lag }] = await sql`
            select coalesce((select extract(epoch from now() - received_at) ${segmentLeft} order by id limit 1), 0)
              + coalesce((select extract(epoch from now() - received_at) ${trackerLeft} order by id limit 1), 0) as lag`
          lags.push(Number(lag))
          await new Promise((r) => setTimeout(r, 500))
        }
      })()
      return async () => {
        running = false
        await done
        return Math.max(0, ...lags)
      }
    }
    const drained = async () => {
      const started = performance.now()
      const left = () => sql`select 1 ${segmentLeft} union all select 1 ${trackerLeft} limit 1`
      while ((await left()).length) await new Promise((r) => setTimeout(r, 100))
      return (performance.now() - started) / 1000
    }
    const basic = `Basic ${Buffer.from(`${token}:`).toString('base64')}`
    const batchUrl = `${server.base}/v1/batch`
    let stopFull = async () => 0
    const segment = await perSecond(batchUrl, { authorization: basic }, segmentBodies(), () => {
      stopFull = sampling()
    })
    const fullLag = await stopFull()
    const drain = await drained()
    // The lag bar is at the bar's rate: requests paced to 0.8 of the tracker's events per second.
    const rate = Math.round((0.8 * tracker.messages) / MESSAGES)
    const stopPaced = sampling()
    const paced = checked(await load(batchUrl, { authorization: basic }, segmentBodies(), SECONDS, rate))
    const pacedLag = await stopPaced()
    const pacedDrain = await drained()
    const [{ stored }] =
      await sql`select count(*)::int as stored from segment_messages where account_id = ${account.id}`

    ctx.report({
      bench: 'segment',
      metric: `POST /api/tracker/track, ${MESSAGES} events x ${CONNECTIONS} clients`,
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
    ctx.report({ bench: 'segment', metric: 'apply lag at full intake, max of samples', value: fullLag, unit: 's' })
    ctx.report({ bench: 'segment', metric: 'backlog drained after full intake', value: drain, unit: 's' })
    ctx.report({
      bench: 'segment',
      metric: 'POST /v1/batch paced to 0.8 x tracker',
      value: (paced.requests.total * MESSAGES) / SECONDS,
      unit: 'msgs/s',
    })
    ctx.report({
      bench: 'segment',
      metric: 'apply lag at 0.8 x tracker, max of samples',
      value: pacedLag,
      unit: 's',
      target: '< 5',
    })
    ctx.report({ bench: 'segment', metric: 'backlog drained after paced load', value: pacedDrain, unit: 's' })
    ctx.report({ bench: 'segment', metric: 'messages stored (warm-up included)', value: stored, unit: 'msgs' })
  } finally {
    await sql.end()
    await server.stop()
  }
}
