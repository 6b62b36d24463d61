// Adapter + router vs a bare node:http handler doing the same work (read the body, JSON.parse,
// validate with valibot, answer JSON), each in its own child process, loaded by autocannon over
// kept-alive connections. Both answers are the same bytes long: the bare one carries the request id
// the adapter adds (checked from autocannon's byte counts, so that a change on either side that
// makes the answers differ fails the bench rather than skewing it).
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createServer } from 'node:http'
import { randomUUID } from 'node:crypto'
import * as v from 'valibot'
import autocannon from 'autocannon'
import { cpuNs, median, type BenchContext } from './lib.ts'

const Body = v.object({
  filters: v.optional(
    v.pipe(
      v.array(
        v.object({ propertyName: v.string(), operator: v.string(), value: v.optional(v.string()) }),
      ),
      v.maxLength(10),
    ),
  ),
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))),
})
const body = JSON.stringify({
  filters: [
    { propertyName: 'country', operator: 'EQ', value: 'US' },
    { propertyName: 'logins', operator: 'GT', value: '10' },
  ],
  limit: 100,
})

const serve = async (mode: 'bare' | 'service') => {
  if (mode === 'bare') {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c) => chunks.push(c))
      req.on('end', () => {
        const result = v.safeParse(Body, JSON.parse(Buffer.concat(chunks).toString('utf8')))
        const payload = JSON.stringify({ ok: result.success })
        res.writeHead(200, {
          'x-request-id': randomUUID(),
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        })
        res.end(payload)
      })
    })
    return new Promise<number>((resolve) =>
      server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
    )
  }
  const { createHttpServer, listen } = await import('../src/http/adapter.ts')
  const { buildRouter } = await import('../src/http/router.ts')
  const app = { log: () => {} } as never
  const router = buildRouter(
    [
      {
        method: 'POST',
        path: '/echo',
        auth: 'none',
        name: 'echo',
        tag: 'operations',
        summary: 'bench',
        reply: { status: 200 },
        body: Body,
        handler: (req) => ({ status: 200, body: { ok: req.input !== undefined } }),
      },
    ],
    app,
  )
  return listen(
    createHttpServer(router, () => {}),
    0,
    '127.0.0.1',
  )
}

// Run as a child: `bench/http.ts serve <mode>` prints the port it listens on.
if (process.argv[2] === 'serve')
  process.stdout.write(`${await serve(process.argv[3] as 'bare' | 'service')}\n`)

const load = (port: number, path: string, seconds: number) =>
  autocannon({
    url: `http://127.0.0.1:${port}${path}`,
    method: 'POST',
    connections: 10,
    duration: seconds,
    headers: { 'content-type': 'application/json' },
    body,
  })

const start = async (mode: 'bare' | 'service') => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'serve', mode],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const port: number = await new Promise((resolve) =>
    child.stdout.once('data', (d) => resolve(Number(String(d).trim()))),
  )
  await load(port, '/echo', 2).catch(() => {}) // warm-up run is discarded
  return { child, port }
}

// Both servers run side by side and are loaded in alternating rounds (the order swapped each
// round), so a burst of other work on the machine weighs on both sides alike; the medians are
// compared.
const ROUNDS = 5

export default async (ctx: BenchContext) => {
  const servers = { bare: await start('bare'), service: await start('service') }
  const seconds = Number(process.env.BENCH_HTTP_SECONDS ?? 8) / 2
  const rates = { bare: [] as number[], service: [] as number[] }
  const bytes = { bare: 0, service: 0 }
  const cpu = { bare: { ns: 0, requests: 0 }, service: { ns: 0, requests: 0 } }
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of round % 2
        ? (['service', 'bare'] as const)
        : (['bare', 'service'] as const)) {
        const before = cpuNs(servers[mode].child.pid!)
        const result = await load(servers[mode].port, '/echo', seconds)
        cpu[mode].ns += cpuNs(servers[mode].child.pid!) - before
        cpu[mode].requests += result.requests.total
        if (result.non2xx || result.errors)
          throw new Error(`${mode}: ${result.non2xx} non-2xx, ${result.errors} errors`)
        rates[mode].push(result.requests.average)
        bytes[mode] = result.throughput.total / result.requests.total
      }
    }
  } finally {
    for (const { child } of Object.values(servers)) child.kill()
  }
  if (Math.abs(bytes.bare - bytes.service) > 1)
    throw new Error(
      `answers differ: ${bytes.bare.toFixed(1)} bytes bare, ${bytes.service.toFixed(1)} through the service`,
    )
  const [bare, service] = [median(rates.bare), median(rates.service)]
  ctx.report({
    bench: 'http',
    metric: `bare node:http, JSON POST + valibot (median of ${ROUNDS} rounds)`,
    value: bare,
    unit: 'req/s',
  })
  ctx.report({
    bench: 'http',
    metric: 'adapter + itty-router, same work',
    value: service,
    unit: 'req/s',
    baseline: bare,
    ratio: service / bare,
    target: '>= 0.9',
  })
  // On a loaded machine the throughput is what the scheduler gave each side; the server's own CPU
  // time per request (all its threads, garbage collection included) is what the code costs.
  const [bareUs, serviceUs] = [cpu.bare, cpu.service].map((c) => c.ns / c.requests / 1000)
  ctx.report({
    bench: 'http',
    metric: 'bare node:http, CPU per request',
    value: bareUs,
    unit: 'µs',
  })
  ctx.report({
    bench: 'http',
    metric: 'adapter + itty-router, CPU per request (bare / this)',
    value: serviceUs,
    unit: 'µs',
    baseline: bareUs,
    ratio: bareUs / serviceUs,
  })
}
