// The connection caps, with real sockets from several loopback addresses (127.0.0.0/8 is all local
// on Linux): one address holding its cap does not shut out another, a connection past a cap gets
// a 503 Problem Details (or, for the probes, their answer) and is closed, and /healthz and /readyz
// are answered while the whole server is full.
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { after, test } from 'node:test'
import { clientOf, RESERVED_CONNECTIONS } from '../src/http/connections.ts'
import { eventually } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const services: TestService[] = []
const sockets: Socket[] = []
after(async () => {
  for (const socket of sockets) socket.destroy()
  for (const s of services) await s.stop()
})

const start = async (overrides: Parameters<typeof startTestService>[0]) => {
  const s = await startTestService({ headersTimeoutMs: 60_000, ...overrides })
  services.push(s)
  return Number(new URL(s.base).port)
}

// A connection from `from`, open and silent: a slow client holding its place.
const open = (port: number, from: string) =>
  new Promise<Socket>((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(socket))
    sockets.push(socket)
    socket.on('error', reject)
  })

// Everything the server sends until it closes the connection, or until 10 s passed.
const received = (socket: Socket) =>
  new Promise<{ text: string; closed: boolean }>((resolve) => {
    let text = ''
    const timer = setTimeout(() => resolve({ text, closed: false }), 10_000)
    socket.on('data', (c) => (text += c))
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ text, closed: true })
    })
    socket.on('error', () => {})
  })

const exchange = (socket: Socket, request: string) => {
  const answer = received(socket)
  socket.write(request)
  return answer
}
// The answer on a new connection from `from`, once the server has seen that address's held-back
// connection before it close (until then, this one is closed unanswered).
const answered = (port: number, from: string, request: string) =>
  eventually(async () => {
    const answer = await exchange(await open(port, from), request)
    return answer.text && answer
  }, `an answer to ${from}`)

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`
const search = (token: string) =>
  `POST /api/v1/customers/search HTTP/1.1\r\nHost: x\r\nservice-key: ${token}\r\n` +
  'content-type: application/json\r\ncontent-length: 2\r\n\r\n{}'

const status = (text: string) => Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1])
const header = (text: string, name: string) => new RegExp(`^${name}: (.*)\r$`, 'im').exec(text)?.[1]
const problem = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))

test('one address at its cap: its next connection gets a 503, another address is served', async () => {
  const port = await start({ maxConnectionsPerAddress: 5 })
  const { token } = await services[0].account()
  await Promise.all(Array.from({ length: 5 }, () => open(port, '127.0.0.3')))

  // Past the cap: one connection is held back and answered, a second one at the same time is not.
  const heldBack = await open(port, '127.0.0.3')
  const dropped = await received(await open(port, '127.0.0.3'))
  assert.deepEqual(dropped, { text: '', closed: true })
  const refused = await exchange(heldBack, search(token))
  assert.equal(status(refused.text), 503, refused.text)
  assert.equal(header(refused.text, 'retry-after'), '1')
  assert.equal(header(refused.text, 'connection'), 'close')
  assert.match(header(refused.text, 'content-type') ?? '', /^application\/problem\+json/)
  assert.equal(
    problem(refused.text).detail,
    'This client address holds its 5 connections. Try again shortly.',
  )
  assert.ok(refused.closed)

  // The probe is answered even from the address at its cap, on the connection past it.
  const probe = await answered(port, '127.0.0.3', get('/healthz'))
  assert.equal(status(probe.text), 200, probe.text)
  assert.equal(header(probe.text, 'connection'), 'close')

  // Another address is served as usual, on a kept-alive connection.
  const other = await open(port, '127.0.0.2')
  for (const request of [get('/healthz'), search(token)]) {
    const answer = await new Promise<string>((resolve) => {
      other.once('data', (c) => resolve(String(c)))
      other.write(request)
    })
    assert.equal(status(answer), 200, answer)
    assert.notEqual(header(answer, 'connection'), 'close')
  }
})

test('the whole server at its cap: the probes are answered, other requests get a 503', async () => {
  // No per-address cap (as behind a proxy): one address fills the server.
  const port = await start({ maxConnections: 20, maxConnectionsPerAddress: 0 })
  const { token } = await services[1].account()
  await Promise.all(Array.from({ length: 20 }, () => open(port, '127.0.0.3')))

  const live = await exchange(await open(port, '127.0.0.2'), get('/healthz'))
  assert.equal(status(live.text), 200, live.text)
  assert.deepEqual(problem(live.text), { status: 'ok' })
  assert.ok(live.closed)
  const ready = await exchange(await open(port, '127.0.0.4'), get('/readyz'))
  assert.equal(status(ready.text), 200, ready.text)
  const refused = await exchange(await open(port, '127.0.0.5'), search(token))
  assert.equal(status(refused.text), 503, refused.text)
  assert.equal(header(refused.text, 'retry-after'), '1')
  assert.equal(
    problem(refused.text).detail,
    'The server holds its 20 connections. Try again shortly.',
  )
  const post = await exchange(
    await open(port, '127.0.0.6'),
    `POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n`,
  )
  assert.equal(status(post.text), 503, 'only GET of a probe is answered')

  // The reserve holds one connection per address, and so many in all; past it, none.
  const reserve = await Promise.all(
    Array.from({ length: RESERVED_CONNECTIONS }, (_, i) => open(port, `127.0.1.${i + 1}`)),
  )
  const past = await received(await open(port, '127.0.2.1'))
  assert.deepEqual(past, { text: '', closed: true })
  const [first] = reserve
  assert.equal(status((await exchange(first, get('/healthz'))).text), 200)
})

test('an IPv6 client counts as its /64; IPv4, mapped or not, as its address', () => {
  const cases: [string, string][] = [
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:10.0.0.1', '::ffff:10.0.0.1'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:ffff::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:db8:0:0:1::', '2001:db8:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ]
  for (const [address, client] of cases) assert.equal(clientOf(address), client, address)
})
