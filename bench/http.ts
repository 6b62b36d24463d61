// Adapter + router vs a bare node:http handler doing the same work (read the body, JSON.parse,
// validate with valibot, answer JSON), each in its own child process, loaded by autocannon.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createServer } from 'node:http'
import * as v from 'valibot'
import autocannon from 'autocannon'
import type { BenchContext } from './lib.ts'

const Body = v.object({
  filters: v.optional(
    v.pipe(
      v.array(v.object({ propertyName: v.string(), operator: v.string(), value: v.optional(v.string()) })),
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
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) })
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
if (process.argv[2] === 'serve') process.stdout.write(`${await serve(process.argv[3] as 'bare' | 'service')}\n`)

const load = (port: number, path: string) =>
  autocannon({
    url: `http://127.0.0.1:${port}${path}`,
    method: 'POST',
    connections: 10,
    duration: Number(process.env.BENCH_HTTP_SECONDS ?? 8),
    headers: { 'content-type': 'application/json' },
    body,
  })

const measure = async (mode: 'bare' | 'service') => {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'serve', mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port: number = await new Promise((resolve) =>
    child.stdout.once('data', (d) => resolve(Number(String(d).trim()))),
  )
  await load(port, '/echo').catch(() => {}) // warm-up run is discarded
  const result = await load(port, '/echo')
  child.kill()
  if (result.non2xx || result.errors) throw new Error(`${mode}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  return result
}

export default async (ctx: BenchContext) => {
  const bare = await measure('bare')
  const service = await measure('service')
  ctx.report({
    bench: 'http',
    metric: 'bare node:http, JSON POST + valibot',
    value: bare.requests.average,
    unit: 'req/s',
  })
  ctx.report({
    bench: 'http',
    metric: 'adapter + itty-router, same work',
    value: service.requests.average,
    unit: 'req/s',
    baseline: bare.requests.average,
    ratio: service.requests.average / bare.requests.average,
    target: '>= 0.85',
  })
}
