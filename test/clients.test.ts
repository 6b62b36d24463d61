// Bounded clients, with real sockets: a body that stalls ends with a 408, headers that never finish
// are cut, and a body over 5 MB gets its 413 Problem Details delivered to Node's fetch and to curl
// (the rest of the body is read and dropped, not left unread). The connection caps:
// test/connection-caps.test.ts.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { after, before, test } from 'node:test'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
let port: number
before(async () => {
  s = await startTestService({
    // Above the pauses of a loaded machine: the 6 MB body below is sent by this same process.
    bodyIdleTimeoutMs: 1500,
    headersTimeoutMs: 1000,
    requestTimeoutMs: 5000,
  })
  port = Number(new URL(s.base).port)
})
after(() => s.stop())

const open = () =>
  new Promise<Socket>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket))
    socket.on('error', reject)
  })
// Everything the server sends until it closes the connection (or the limit passes).
const received = (socket: Socket, limitMs: number) =>
  new Promise<{ text: string; closed: boolean; ms: number }>((resolve) => {
    const started = Date.now()
    let text = ''
    const timer = setTimeout(
      () => resolve({ text, closed: false, ms: Date.now() - started }),
      limitMs,
    )
    socket.on('data', (c) => (text += c))
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ text, closed: true, ms: Date.now() - started })
    })
    socket.on('error', () => {})
  })

test('a body that stalls gets a 408 Problem Details within the idle bound, and the connection closes', async () => {
  const socket = await open()
  socket.write(
    'POST /api/v1/customers/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n',
  )
  socket.write(`service-key: x\r\nContent-Length: 100\r\n\r\n{"filt`)
  const answer = await received(socket, 5000)
  assert.match(answer.text, /^HTTP\/1\.1 408 /)
  assert.match(answer.text, /application\/problem\+json/)
  assert.match(answer.text, /No part of the request body arrived for 1500 ms/)
  assert.ok(answer.ms < 4000, `${answer.ms} ms`)
  assert.ok(answer.closed)
})

test('headers that never finish are cut by headersTimeout', async () => {
  const socket = await open()
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ')
  const answer = await received(socket, 8000)
  assert.ok(answer.closed, 'the connection was not closed')
  assert.ok(answer.ms < 7000, `${answer.ms} ms`)
  assert.doesNotMatch(answer.text, /^HTTP\/1\.1 200/)
})

test('a body over 5 MB: fetch and curl receive the 413 Problem Details', async () => {
  const big = JSON.stringify({
    customers: [{ external_id: 'x', name: 'x'.repeat(6 * 1024 * 1024) }],
  })
  const res = await fetch(`${s.base}/api/v1/customers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'service-key': 'x' },
    body: big,
  })
  assert.equal(res.status, 413)
  assert.equal((await res.json()).status, 413)
  // Asynchronously: the service runs in this process, and a synchronous spawn would block it.
  const child = spawn('curl', [
    '-s',
    '-o',
    '-',
    '-w',
    '\n%{http_code}',
    '-H',
    'content-type: application/json',
    '--data-binary',
    '@-',
    `${s.base}/api/v1/contacts`,
  ])
  let out = ''
  child.stdout.on('data', (c) => (out += c))
  child.stdin.end(big)
  const [code] = (await once(child, 'exit')) as [number]
  const curl = { status: code, stdout: out, stderr: '' }
  assert.equal(curl.status, 0, curl.stderr)
  const lines = curl.stdout.trim().split('\n')
  assert.equal(lines.pop(), '413')
  assert.equal(JSON.parse(lines.join('\n')).title, 'Content Too Large')
})
