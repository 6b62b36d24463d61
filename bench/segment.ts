// Segment ingest: POST /v1/batch with batches of 100 typical messages (mostly tracks, some
// identifies and groups, each with a messageId of its own) from 16 concurrent clients, against
// the tracker's own intake (POST /api/tracker/track, 100 events a request) of the same service in
// the same run: each four times at full intake, in two rounds of tracker, /v1/batch, /v1/batch,
// tracker, compared by their means. The apply lag is each message's own: from the 200 of the
// request that carried it to the first poll (every 100 ms) that sees it decided: by the Segment
// apply job (applied, or parked or dropped as the mapping says), or for a track that names its
// customer, stored as a tracked event, by the tracker's apply job. It is taken twice: at the first
// full intake of /v1/batch (the clients as fast as they can), then between the rounds with the
// requests paced to the bar's rate, 0.8 of the tracker's events per second, where the issue sets
// its bar (< 5 s); max and p95 of every message. The tracker's own pipeline is measured the same
// way at the same rate first (its events numbered by their request in data.contact), so that the
// bar can be read against what the baseline itself does.
import autocannon from 'autocannon'
import { connect } from '../src/db/client.ts'
import { waitingSql } from '../src/tracking/intake/cursor.ts'
import { startServer, startWorker } from './server.ts'
import { type BenchContext, percentile } from './lib.ts'

type Fragment = ReturnType<typeof waitingSql>

const SECONDS = Number(process.env.BENCH_SEGMENT_SECONDS ?? 10)
const CONNECTIONS = 16
// autocannon paces each connection to overallRate / connections a second, one request at a
// time: at 16 connections a request slower than 100 ms kept the paced load under its rate
// (0.58 of it in one run).
const PACED_CONNECTIONS = 64
const MESSAGES = 100
const CUSTOMERS = 1000
const NAMES = ['page_view', 'login', 'feature_used', 'export', 'invite_sent']

// Eight bodies each, cycled; `@@` in a Segment body becomes the request's number, so that every
// message is new (a repeated messageId would be deduplicated, not applied).
const relayBodies = () =>
  Array.from({ length: 8 }, (_, b) =>
    JSON.stringify({
      sentAt: '@@SENT',
      batch: Array.from({ length: MESSAGES }, (_, i) => {
        const n = b * MESSAGES + i
        const customer = `cust-${n % CUSTOMERS}`
        const userId = `${customer}-contact-${n % 3}`
        const common = {
          messageId: `m-@@-${i}`,
          userId,
          timestamp: '@@SENT',
          context: { library: { name: 'bench' } },
        }
        if (n % 10 === 0)
          return {
            ...common,
            type: 'group',
            groupId: customer,
            traits: { name: `Customer ${n}`, plan: 'pro' },
          }
        if (n % 10 === 1)
          return {
            ...common,
            type: 'identify',
            traits: { name: `Person ${n % 3}`, role: 'member' },
          }
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
          // `@@`: the request's number, as in the Segment bodies (no attribute: stored,
          // never applied).
          data: { contact: { last_page: `/app/page/${n % 50}`, bench_request: '@@' } },
        }
      }),
    }),
  )

let sent = 0
// When each request (its number, `@@` in its messages' ids) was answered 200.
const answered = new Map<number, number>()
const load = (
  url: string,
  headers: Record<string, string>,
  bodies: string[],
  duration: number,
  rate?: number,
) =>
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
    throw new Error(
      `${result.url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    )
  return result
}

type Rate = { messages: number; p99: number }
const perSecond = async (
  url: string,
  headers: Record<string, string>,
  bodies: string[],
  during = () => {},
) => {
  checked(await load(url, headers, bodies, 2)) // warm-up
  during()
  const result = checked(await load(url, headers, bodies, SECONDS))
  return { messages: (result.requests.total * MESSAGES) / SECONDS, p99: result.latency.p99 }
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  // As deployed at scale (docs/operations.md): HTTP (`serve --no-worker`) and the `worker` apart.
  // In one `serve` the apply job's statements wait behind the intake's requests on one event
  // loop, and it applied a fifth of its rate alone while the load ran (docs/benchmarks.md);
  // BENCH_SEGMENT_ONE_PROCESS=1 runs so.
  const oneProcess = process.env.BENCH_SEGMENT_ONE_PROCESS === '1'
  const server = await startServer(
    url,
    { SERVICE_TRACK_RATE_LIMIT: '100000000' },
    oneProcess ? [] : ['--no-worker'],
  )
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
      select ${account.id}, 'cust-' || i, 'Customer ' || i
        from generate_series(0, ${CUSTOMERS - 1}) i`
    await sql`analyze customers`
    const { token } = await server.admin('POST', `/accounts/${account.id}/keys`, {
      scopes: ['track'],
    })

    const trackerUrl = `${server.base}/api/tracker/track`
    const trackerFull = () =>
      perSecond(trackerUrl, { 'service-key': token }, trackerBodies(account.tracker_key))
    // Where a pipeline's rows wait: `undecided`, as its apply job reads them ('received' at or past
    // the account's cursor, tracking/intake/cursor.ts), and `rows(first)`, its rows (id, and n: the
    // number of the request that carried it) of the requests from `first` on.
    interface Source {
      undecided: Fragment
      rows: (first: number) => Fragment
    }
    const numbered = sql`split_part(message_id, '-', 2)::int`
    const trackerSource: Source = {
      undecided: waitingSql(sql, 'tracking_events', account.id),
      rows: (first) => sql`
        select id, (data->'contact'->>'bench_request')::int as n from tracking_events
        where account_id = ${account.id} and (data->'contact'->>'bench_request')::int >= ${first}`,
    }
    // Segment's messages, and its tracks that name their customer: stored as tracked events
    // (tracking/relay.ts).
    const relaySources: Source[] = [
      {
        undecided: waitingSql(sql, 'segment_messages', account.id),
        rows: (first) => sql`select id, ${numbered} as n from segment_messages
          where account_id = ${account.id} and message_id like 'm-%' and ${numbered} >= ${first}`,
      },
      {
        undecided: trackerSource.undecided,
        rows: (first) => sql`select id, ${numbered} as n from tracking_events
          where account_id = ${account.id} and message_id like 'm-%' and ${numbered} >= ${first}`,
      },
    ]
    type Poll = { at: number; frontiers: number[] }
    // Every 100 ms: when the poll's snapshot was taken, and per source the smallest id it saw still
    // undecided (every row it saw below that was decided). A row is seen decided by the first poll
    // taken after its request's 200 whose frontier is past its id: a row committed after a poll
    // is judged by later polls.
    const polling = (sources: Source[]) => {
      let running = true
      const polls: Poll[] = []
      const poll = async () => {
        const at = performance.now()
        const frontiers = await Promise.all(
          sources.map(async ({ undecided }) => {
            const [{ frontier }] = await sql`
              select coalesce((select min(id) from (${undecided}) w), 9007199254740991) as frontier`
            return Number(frontier)
          }),
        )
        polls.push({ at, frontiers })
      }
      const done = (async () => {
        while (running) {
          await poll()
          await new Promise((r) => setTimeout(r, 100))
        }
      })()
      // Stopped once drained: a last poll sees the last rows decided.
      return async () => {
        running = false
        await done
        await poll()
        return polls
      }
    }
    const undecidedCount = async (sources: Source[]) => {
      let n = 0
      for (const { undecided } of sources)
        n += (await sql`select count(*)::int as n from (${undecided}) w`)[0].n
      return n
    }
    const drained = async (sources: Source[]) => {
      const started = performance.now()
      while ((await undecidedCount(sources)) > 0) await new Promise((r) => setTimeout(r, 100))
      return (performance.now() - started) / 1000
    }
    // The lag of every row of the requests answered from `first` on, in seconds: max and p95.
    const lags = async (sources: Source[], first: number, polls: Poll[]) => {
      const all: number[] = []
      for (const [k, source] of sources.entries())
        for (const { id, n } of (await source.rows(first)) as unknown as {
          id: number
          n: number
        }[]) {
          const at = answered.get(n)
          if (at === undefined) continue
          let p = polls.findIndex((poll) => poll.at >= at)
          while (p >= 0 && p < polls.length && polls[p].frontiers[k] <= id) p++
          if (p < 0 || p === polls.length) throw new Error(`row ${id} was never seen decided`)
          all.push((polls[p].at - at) / 1000)
        }
      all.sort((a, b) => a - b)
      return { max: all[all.length - 1], p95: percentile(all, 95), rows: all.length }
    }
    // A load paced to `rate` requests a second, with the apply lag of its rows, what the apply kept
    // up with while it ran, and how fast it drained the rest alone.
    const pacedLoad = async (
      url: string,
      headers: Record<string, string>,
      bodies: string[],
      sources: Source[],
    ) => {
      const first = sent
      const stop = polling(sources)
      const result = checked(await load(url, headers, bodies, SECONDS, rate))
      const behind = await undecidedCount(sources)
      const drain = await drained(sources)
      const lag = await lags(sources, first, await stop())
      const intake = (result.requests.total * MESSAGES) / SECONDS
      return { intake, lag, drain, behind, kept: intake - behind / SECONDS, alone: behind / drain }
    }

    // Full intake in two rounds of tracker, /v1/batch, /v1/batch, tracker, each run after the
    // backlog before it is drained: every run finds the database larger than the one before,
    // and the machine's noise moved one 10 s run of the same intake by up to a fifth; so both
    // intakes are measured at the same mean size, four times each. The lag at full intake is that
    // of /v1/batch's first run.
    const basic = `Basic ${Buffer.from(`${token}:`).toString('base64')}`
    const batchUrl = `${server.base}/v1/batch`
    const relayFull = (during?: () => void) =>
      perSecond(batchUrl, { authorization: basic }, relayBodies(), during)
    const trackerRuns: Rate[] = []
    const relayRuns: Rate[] = []
    let fullLag = { max: Number.NaN, p95: Number.NaN, rows: 0 }
    let drain = 0
    const round = async (first: boolean) => {
      trackerRuns.push(await trackerFull())
      await drained([trackerSource])
      if (first) {
        let stopFull = async () => [] as Poll[]
        let fullFirst = 0
        relayRuns.push(
          await relayFull(() => {
            fullFirst = sent
            stopFull = polling(relaySources)
          }),
        )
        drain = await drained(relaySources)
        fullLag = await lags(relaySources, fullFirst, await stopFull())
      } else {
        relayRuns.push(await relayFull())
        await drained(relaySources)
      }
      relayRuns.push(await relayFull())
      await drained(relaySources)
      trackerRuns.push(await trackerFull())
      await drained([trackerSource])
    }
    const mean = (runs: Rate[]) => runs.reduce((sum, r) => sum + r.messages, 0) / runs.length
    await round(true)
    // The paced loads come between the two rounds, at the mean size of the database of the
    // full runs, at the bar's rate: 0.8 of the tracker's mean events per second of the first
    // round. The tracker's own pipeline first, the same lag for comparison; then /v1/batch,
    // where the lag bar is.
    const rate = Math.round((0.8 * mean(trackerRuns)) / MESSAGES)
    const trackerPaced = await pacedLoad(
      trackerUrl,
      { 'service-key': token },
      trackerBodies(account.tracker_key),
      [trackerSource],
    )
    const paced = await pacedLoad(batchUrl, { authorization: basic }, relayBodies(), relaySources)
    await round(false)
    const tracker = { messages: mean(trackerRuns), p99: Math.max(...trackerRuns.map((r) => r.p99)) }
    const segment = { messages: mean(relayRuns), p99: Math.max(...relayRuns.map((r) => r.p99)) }
    const [{ stored }] = await sql`
      select ((select count(*) from segment_messages where account_id = ${account.id})
        + (select count(*) from tracking_events where account_id = ${account.id}
          and message_id is not null))::int
        as stored`

    // The spread of each intake's own runs: the noise the means smooth.
    const spread = (who: string, unit: string, runs: Rate[]) => {
      const rates = runs.map((r) => r.messages)
      const [slowest, fastest] = [Math.min(...rates), Math.max(...rates)]
      const metric = `${who}: its slowest full run, against its fastest`
      ctx.report({
        bench: 'segment',
        metric,
        value: slowest,
        unit,
        baseline: fastest,
        ratio: slowest / fastest,
      })
    }
    spread('tracker', 'events/s', trackerRuns)
    spread('/v1/batch', 'msgs/s', relayRuns)
    ctx.report({
      bench: 'segment',
      metric: `POST /api/tracker/track, ${MESSAGES} events x ${CONNECTIONS} clients${shape}, mean of 4 runs`,
      value: tracker.messages,
      unit: 'events/s',
    })
    ctx.report({
      bench: 'segment',
      metric: `POST /v1/batch, ${MESSAGES} messages x ${CONNECTIONS} clients, mean of 4 runs`,
      value: segment.messages,
      unit: 'msgs/s',
      baseline: tracker.messages,
      ratio: segment.messages / tracker.messages,
      target: '>= 0.8',
    })
    ctx.report({ bench: 'segment', metric: 'p99 latency, tracker', value: tracker.p99, unit: 'ms' })
    ctx.report({
      bench: 'segment',
      metric: 'p99 latency, /v1/batch',
      value: segment.p99,
      unit: 'ms',
    })
    ctx.report({
      bench: 'segment',
      metric: 'apply lag at full intake, max',
      value: fullLag.max,
      unit: 's',
    })
    ctx.report({
      bench: 'segment',
      metric: 'apply lag at full intake, p95',
      value: fullLag.p95,
      unit: 's',
    })
    ctx.report({
      bench: 'segment',
      metric: 'backlog drained after full intake',
      value: drain,
      unit: 's',
    })
    // The paced load's rows, for Segment's pipeline and the tracker's own.
    const pacedRows = (
      who: string,
      unit: string,
      p: Awaited<ReturnType<typeof pacedLoad>>,
      target?: string,
    ) => {
      const row = (metric: string, value: number, u: string, extra = {}) =>
        ctx.report({ bench: 'segment', metric: `${who}: ${metric}`, value, unit: u, ...extra })
      row('intake paced to 0.8 x tracker', p.intake, unit, {
        baseline: rate * MESSAGES,
        ratio: p.intake / (rate * MESSAGES),
      })
      row('apply lag at 0.8 x tracker, max', p.lag.max, 's', target ? { target } : {})
      row('apply lag at 0.8 x tracker, p95', p.lag.p95, 's')
      row('backlog drained after paced load', p.drain, 's')
      row('apply rate while the paced load ran', p.kept, unit, {
        baseline: p.intake,
        ratio: p.kept / p.intake,
      })
      row('apply rate draining alone after it', p.alone, unit)
    }
    pacedRows('tracker', 'events/s', trackerPaced)
    pacedRows('/v1/batch', 'msgs/s', paced, '< 5')
    ctx.report({
      bench: 'segment',
      metric: 'messages stored (warm-up included)',
      value: stored,
      unit: 'msgs',
    })
  } finally {
    await sql.end()
    await worker?.stop()
    await server.stop()
  }
}
