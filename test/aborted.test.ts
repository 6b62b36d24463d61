// A client that goes before its answer (half a body, or a search it stops waiting for) is the
// client's doing: its request is logged at info with status 499, no error line, and it never adds
// to the 5xx series of http_requests_total (it is counted as 499). The real routes and database,
// behind an adapter whose log the test reads.
import assert from 'node:assert/strict'
import type { Server } from 'node:http'
import { once } from 'node:events'
import { connect } from 'node:net'
import { after, before, test } from 'node:test'
import { routes } from '../src/api/routes.ts'
import type { App } from '../src/context.ts'
import { createHttpServer, drain, listen } from '../src/http/adapter.ts'
import { buildRouter } from '../src/http/router.ts'
import { lockTable } from './helpers/db.ts'
import { eventually } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

type Line = { level: string; msg: string; [field: string]: unknown }
let s: TestService
let server: Server
let port: number
const lines: Line[] = []
before(async () => {
  s = await startTestService({}, { http: true, worker: false })
  const log: App['log'] = (level, msg, fields) => lines.push({ level, msg, ...fields })
  const app = { ...s.app, log }
  server = createHttpServer(buildRouter(routes, app), log, app.config)
  port = await listen(server, 0, '127.0.0.1')
})
after(async () => {
  await drain(server)
  await s.stop()
})

// http_requests_total by status class, over every route ('5xx', '499').
const requests = async () => {
  const text: string = (await s.call('GET', '/metrics')).body
  const total = (status: RegExp) =>
    [...text.matchAll(/^http_requests_total\{.*status="(\d+)"\} (\d+)$/gm)]
      .filter((m) => status.test(m[1]))
      .reduce((sum, m) => sum + Number(m[2]), 0)
  return { serverErrors: total(/^5/), gone: total(/^499$/) }
}

// The log lines of the request with this id.
const logged = (id: string) => lines.filter((l) => l.id === id)
const assertGone = (id: string) => {
  const mine = logged(id)
  assert.deepEqual(
    mine.map((l) => [l.level, l.msg, l.status]),
    [['info', 'request', 499]],
  )
  assert.ok(
    !lines.some((l) => l.level === 'error'),
    JSON.stringify(lines.filter((l) => l.level === 'error')),
  )
}

test('half a body, then the connection closes: 499 at info, no 5xx counted', async () => {
  const { token } = await s.account('Half')
  const before = await requests()
  // The server says it has the headers (100 Continue) before the half body is sent and
  // the client goes.
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  socket.write(
    'POST /api/v1/customers HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nx-request-id: half-body\r\n' +
      `service-key: ${token}\r\ncontent-length: 1000\r\nexpect: 100-continue\r\n\r\n`,
  )
  assert.match(String((await once(socket, 'data'))[0]), /^HTTP\/1\.1 100 Continue/)
  socket.write('{"customers": [{"external_id": "a')
  socket.destroy()
  await eventually(() => logged('half-body').length, 'the request to end')
  assertGone('half-body')
  const after = await requests()
  assert.equal(after.serverErrors, before.serverErrors)
  assert.equal(after.gone, before.gone + 1)
})

test('a search its client stopped waiting for: 499 at info once it ends, no 5xx counted', async () => {
  const account = await s.account('Leaving')
  const before = await requests()
  // The customers table locked, so that the search is still running when its client goes.
  const unlock = await lockTable(s.sql, 'customers')
  const leaving = new AbortController()
  const answer = fetch(`http://127.0.0.1:${port}/api/v1/customers/search`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'service-key': account.token,
      'x-request-id': 'gone-early',
    },
    body: '{}',
    signal: leaving.signal,
  }).catch((err: Error) => err.name)
  await eventually(async () => {
    const [{ n }] = await s.sql`select count(*)::int as n from pg_locks
      where relation = 'customers'::regclass and not granted`
    return n > 0
  }, 'the search to wait on the lock')
  leaving.abort()
  assert.equal(await answer, 'AbortError')
  await unlock()
  await eventually(() => logged('gone-early').length, 'the request to end')
  assertGone('gone-early')
  const after = await requests()
  assert.equal(after.serverErrors, before.serverErrors)
  assert.equal(after.gone, before.gone + 1)
})
