// The router finds a static route by its path text, skipping itty-router; its answers must be the
// ones itty-router gives. A trailing slash takes itty-router's way to the same route, so each
// request is answered both ways and compared.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import * as v from 'valibot'
import type { App } from '../src/context.ts'
import { refuse } from '../src/errors.ts'
import { buildRouter } from '../src/http/router.ts'
import type { Reply, Req, Route } from '../src/route.ts'

const logged: unknown[] = []
const app = { log: (...args: unknown[]) => logged.push(args), config: {} } as unknown as App

const seen = (req: Req) => ({
  route: req.route,
  params: { ...req.params },
  query: { ...req.query },
  queryProto: Object.getPrototypeOf(req.query),
  input: req.input,
})
const route = (
  method: Route['method'],
  path: string,
  handler: Route['handler'],
  extra?: Partial<Route>,
): Route => ({
  method,
  path,
  auth: 'none',
  name: path,
  tag: 'operations',
  summary: 'test',
  reply: { status: 200 },
  handler,
  ...extra,
})
const router = buildRouter(
  [
    route('GET', '/items/:id', (req) => ({ status: 200, body: seen(req) })),
    route('GET', '/items/count', () => ({ status: 200, body: 'never: /items/:id comes first' })),
    route('POST', '/echo', (req) => ({ status: 200, body: seen(req) }), {
      body: v.object({ n: v.optional(v.number()) }),
    }),
    route('GET', '/refused', () => refuse(409, 'Taken.')),
    route('GET', '/boom', () => {
      throw new Error('bug')
    }),
    route('GET', '/later', async (req) => {
      req.replyHeaders = { 'ratelimit-limit': '5' }
      await new Promise((r) => setTimeout(r, 1))
      return { status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' }
    }),
    route('GET', '/admin-only', () => ({ status: 200 }), { auth: 'admin' }),
    route('GET', '/v1.2/files.json', (req) => ({ status: 200, body: seen(req) })),
  ],
  app,
)

const request = (method: string, path: string, body = ''): Req => ({
  id: 'id',
  method,
  url: `http://local${path}`,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(body),
  params: {},
  query: {},
})
const answer = async (method: string, path: string, body?: string) => {
  const req = request(method, path, body)
  const reply: Reply = await router(req)
  return { reply, route: req.route }
}

test('a static route answers as itty-router does, and in the same tick when its work is synchronous', async () => {
  const cases: [string, string, string?][] = [
    ['POST', '/echo', '{"n":1}'],
    ['POST', '/echo', ''],
    ['POST', '/echo', '{"n":"x"}'],
    ['POST', '/echo', '{'],
    ['GET', '/refused'],
    ['GET', '/boom'],
    ['GET', '/later'],
    ['GET', '/admin-only'],
    ['GET', '/v1.2/files.json'],
  ]
  for (const [method, path, body] of cases) {
    const fast = await answer(method, path, body)
    assert.deepEqual(fast, await answer(method, `${path}/`, body), `${method} ${path} ${body}`)
  }
  assert.equal((await answer('GET', '/refused')).reply.status, 409)
  assert.equal((await answer('GET', '/admin-only')).reply.headers?.['www-authenticate'], 'Bearer')
  assert.deepEqual((await answer('GET', '/later')).reply.headers, {
    'ratelimit-limit': '5',
    'content-type': 'text/plain',
  })
  assert.ok(logged.some((l) => JSON.stringify(l).includes('handler failed')))
  assert.ok(!(router(request('POST', '/echo', '{}')) instanceof Promise))
  assert.ok(router(request('POST', '/echo/', '{}')) instanceof Promise)
})

test('a static route behind an earlier matching route, a query, 405 and 404 keep their answers', async () => {
  const shadowed = await answer('GET', '/items/count')
  assert.equal(shadowed.route, '/items/:id')
  assert.deepEqual((shadowed.reply.body as { params: unknown }).params, { id: 'count' })
  const queried = (await answer('POST', '/echo?a=1&a=2&b=%20', '{}')).reply.body as ReturnType<
    typeof seen
  >
  assert.deepEqual(queried.query, { a: ['1', '2'], b: ' ' })
  assert.equal(queried.queryProto, null)
  const fast = (await answer('POST', '/echo', '{}')).reply.body as ReturnType<typeof seen>
  assert.equal(fast.queryProto, null)
  const wrongMethod = (await answer('GET', '/echo')).reply
  assert.equal(wrongMethod.status, 405)
  assert.equal(wrongMethod.headers?.allow, 'POST')
  assert.equal((await answer('GET', '/nothing')).reply.status, 404)
  assert.equal((await answer('GET', '/echo/../refused')).reply.status, 409)
})
