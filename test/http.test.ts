import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'
import { createHttpServer, listen, drain } from '../src/http/adapter.ts'
import { buildRouter } from '../src/http/router.ts'
import type { App } from '../src/context.ts'
import { routes } from '../src/api/routes.ts'

let s: TestService
before(async () => {
  s = await startTestService()
})
after(() => s.stop())

const INTERFACE_ENDPOINTS = [
  '/api/v1/customers/search',
  '/api/v1/contacts/search',
  '/api/v1/customers',
  '/api/v1/contacts',
  '/api/tracker/track',
]

const assertProblem = (res: { status: number; headers: Headers; body: any }, status: number) => {
  assert.equal(res.status, status)
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/)
  assert.equal(res.body.status, status)
  assert.equal(typeof res.body.title, 'string')
  assert.equal(typeof res.body.detail, 'string')
  assert.equal(res.body.type, 'about:blank')
}

test('healthz and readyz answer 200', async () => {
  assert.deepEqual((await s.call('GET', '/healthz')).body, { status: 'ok' })
  assert.deepEqual((await s.call('GET', '/readyz')).body, { status: 'ready' })
})

test('every interface endpoint answers 405 with Allow: POST to other methods', async () => {
  for (const path of INTERFACE_ENDPOINTS) {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const res = await s.call(method, path)
      assertProblem(res, 405)
      assert.equal(res.headers.get('allow'), 'POST', `${method} ${path}`)
    }
  }
})

test('HEAD is answered wherever GET is, with its status and headers and no body', async () => {
  const { id, token } = await s.account('Heads')
  const auth = { authorization: `Bearer ${ADMIN_TOKEN}`, 'service-key': token }
  const gets = routes.filter((r) => r.method === 'GET')
  assert.ok(gets.some((r) => r.path === '/healthz') && gets.some((r) => r.path === '/console'))
  for (const r of gets) {
    const path = r.path.replace(/:(\w+)/g, (_, name) =>
      name === 'id' || name === 'account_id' ? String(id) : '1',
    )
    const get = await fetch(s.base + path, { headers: auth })
    await get.arrayBuffer()
    const head = await fetch(s.base + path, { method: 'HEAD', headers: auth })
    assert.equal(head.status, get.status, `HEAD ${path}`)
    assert.equal(head.headers.get('content-type'), get.headers.get('content-type'), `HEAD ${path}`)
    assert.equal((await head.arrayBuffer()).byteLength, 0, `HEAD ${path}`)
  }
  // A path that answers GET says so in Allow, with HEAD; a POST-only path does not admit HEAD.
  assert.equal((await s.call('DELETE', '/healthz')).headers.get('allow'), 'GET, HEAD')
  assert.equal((await s.call('HEAD', '/api/v1/customers')).status, 405)
})

test('unknown routes answer 404 Problem Details', async () => {
  assertProblem(await s.call('GET', '/nope'), 404)
  assertProblem(await s.call('POST', '/api/v2/customers'), 404)
})

test('invalid JSON answers 400', async () => {
  const res = await s.admin('POST', '/accounts', '{"name": ')
  assertProblem(res, 400)
  assert.match(res.body.detail, /not valid JSON/)
})

test('schema errors name the field path', async () => {
  const res = await s.admin('POST', '/accounts', { name: 5, source_of_truth: 'lower' })
  assertProblem(res, 400)
  assert.deepEqual(res.body.errors.map((e: { path: string }) => e.path).sort(), [
    '/name',
    '/source_of_truth',
  ])
})

test('a body over 5 MB answers 413 without being read to the end, saying 5 MB', async () => {
  const { token } = await s.account()
  const big = '{"customers":"' + 'x'.repeat(5 * 1024 * 1024) + '"}'
  const res = await s.call('POST', '/api/v1/customers', big, { 'service-key': token })
  assertProblem(res, 413)
  assert.equal(res.body.detail, 'The request body is larger than 5 MB.')
  // Announced length over the limit: refused before any byte of the body is read.
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(
      s.base + '/api/v1/contacts',
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(6 * 1024 * 1024),
          'service-key': token,
        },
      },
      (res) => {
        res.resume()
        resolve(res.statusCode!)
      },
    )
    req.on('error', reject)
    req.write('{')
  })
  assert.equal(status, 413)
})

test('an error list keeps its first 20 entries and counts the rest; echoed names are cut to 200', async () => {
  const { token, trackerKey } = await s.account('Lists')
  const customers = Array.from({ length: 1000 }, (_, i) => ({ external_id: i, name: 5 }))
  const res = await s.call('POST', '/api/v1/customers', { customers }, { 'service-key': token })
  assertProblem(res, 400)
  assert.equal(res.body.errors.length, 20)
  assert.equal(res.body.more_errors, 1980)
  assert.match(res.body.detail, /The first 20 errors are listed, and 1,980 more like these\.$/)
  // A 1 MB unknown key comes back as its first 200 characters.
  const key = 'k'.repeat(1024 * 1024)
  const search = await s.call('POST', '/api/v1/customers/search', `{"${key}": 1}`, {
    'service-key': token,
  })
  assertProblem(search, 400)
  const text = JSON.stringify(search.body)
  assert.ok(text.length < 2000, text.slice(0, 300))
  assert.match(search.body.errors[0].message, /^Unknown key k{200}\.\.\. \(1,048,576 characters\)/)
  // So is a free-form key over the text cap, in the error's path.
  const event = {
    name: 'e',
    timestamp: Date.now(),
    identification: { customer: 'c' },
    data: { customer: {} },
  }
  const long = { ...event, data: { customer: { ['k'.repeat(70_000)]: 1 } } }
  const tracked = await s.call(
    'POST',
    '/api/tracker/track',
    { trackerKey, events: [long] },
    { 'service-key': token },
  )
  assertProblem(tracked, 400)
  assert.equal(
    tracked.body.errors[0].path,
    `/events/0/data/customer/${'k'.repeat(200)}... (70,000 characters)`,
  )
})

test("every response carries a request id, echoing the caller's", async () => {
  const res = await s.call('GET', '/healthz', undefined, { 'x-request-id': 'abc-123' })
  assert.equal(res.headers.get('x-request-id'), 'abc-123')
  assert.match(
    (await s.call('GET', '/healthz')).headers.get('x-request-id') ?? '',
    /^[0-9a-f-]{36}$/,
  )
})

test('a handler bug answers 500 without internals, and is logged', async () => {
  const lines: unknown[] = []
  const app = {
    ...s.app,
    log: (level: string, msg: string, fields?: object) => lines.push({ level, msg, ...fields }),
  } as App
  const server = createHttpServer(
    buildRouter(
      [
        {
          method: 'GET',
          path: '/boom',
          auth: 'none',
          name: 'boom',
          tag: 'operations',
          summary: 'test',
          reply: { status: 200 },
          handler: () => {
            throw new Error('secret internal detail')
          },
        },
      ],
      app,
    ),
    app.log,
  )
  const port = await listen(server, 0, '127.0.0.1')
  const res = await fetch(`http://127.0.0.1:${port}/boom`)
  const text = await res.text()
  await drain(server)
  assert.equal(res.status, 500)
  assert.doesNotMatch(text, /secret internal detail|Error:|at /)
  assert.equal(JSON.parse(text).detail, 'An internal error occurred.')
  assert.ok(lines.some((l: any) => l.level === 'error' && /secret internal detail/.test(l.error)))
})
