import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import { guardConnections } from './connections.ts'
import { LARGE_BODY_BYTES } from './permits.ts'
import { problem } from './problem.ts'
import { size } from '../validate.ts'
import { observeRequest } from '../metrics.ts'
import type { Log } from '../log.ts'
import type { Reply, Req } from '../route.ts'

// What the adapter puts before the request target to make Req.url absolute.
export const ORIGIN = 'http://local'

export const MAX_BODY_BYTES = 5 * 1024 * 1024
// A body over the limit is read and thrown away up to this size before the 413 is sent: a client
// (Node's fetch, many proxies) that is still sending when the connection closes reports a network
// error instead of the answer. Beyond it the connection is closed at once.
const DISCARD_BYTES = 4 * MAX_BODY_BYTES

// How long a client may take: for its headers, its whole request, a pause within its body, and
// between requests on a kept-alive connection; how many connections the server holds at once, and
// how many of them one client address may hold (0: no per-address cap).
interface ClientBounds {
  headersTimeoutMs: number
  requestTimeoutMs: number
  bodyIdleTimeoutMs: number
  keepAliveTimeoutMs: number
  maxConnections: number
  maxConnectionsPerAddress: number
}
const DEFAULT_BOUNDS: ClientBounds = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  bodyIdleTimeoutMs: 10_000,
  keepAliveTimeoutMs: 65_000,
  maxConnections: 1000,
  maxConnectionsPerAddress: 100,
}

// The status logged and counted for a request whose client went before its answer (nginx's
// "client closed request"): the client's doing, never a server error. Nothing is sent.
export const CLIENT_GONE = 499

type Body = Buffer | 'too large' | 'too large, close' | 'stalled' | 'aborted'

// Calls done once with the body; 'too large' when it is over the limit; 'stalled' when no byte
// arrived for the idle timeout; or 'aborted' when the client broke the request off. A body
// announced over the limit is refused at once, and node:http reads and drops the rest of it before
// the connection's next request; one that turns out too large while it streams is read to its end
// and dropped. Either way only up to DISCARD_BYTES: past that, the connection closes ('too large,
// close'). This runs for every request, so it makes no Promise, and no timer for the common body
// that arrived with its headers.
const readBody = (
  im: IncomingMessage,
  limit: number,
  idleMs: number,
  done: (body: Body) => void,
) => {
  const declared = Number(im.headers['content-length'])
  if (declared > DISCARD_BYTES) return done('too large, close')
  if (declared > limit) return done('too large')
  const chunks: Buffer[] = []
  // A large body of announced length is copied into one buffer as it arrives: its chunks
  // are garbage at once, not held beside their concatenation until the end (uploads waiting
  // for their permit).
  const whole = declared >= LARGE_BODY_BYTES ? Buffer.allocUnsafe(declared) : undefined
  let size = 0
  let open = true
  let idle: NodeJS.Timeout | undefined
  im.on('data', (chunk: Buffer) => {
    if (!open) return
    size += chunk.length
    if (size > DISCARD_BYTES) {
      open = false
      clearTimeout(idle)
      return done('too large, close')
    }
    idle?.refresh()
    if (whole) chunk.copy(whole, size - chunk.length)
    else if (size <= limit) chunks.push(chunk)
  })
  im.on('end', () => {
    if (!open) return
    open = false
    clearTimeout(idle)
    if (size > limit) done('too large')
    else
      done(
        whole ? whole.subarray(0, size) : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks),
      )
  })
  // node:http reports only a connection lost mid-body here ('aborted', ECONNRESET).
  im.on('error', () => {
    if (!open) return
    open = false
    clearTimeout(idle)
    done('aborted')
  })
  // Once this round of I/O is done node:http has parsed all that came with the headers; only a
  // body still incomplete then can stall.
  setImmediate(() => {
    if (!open || im.complete) return
    idle = setTimeout(() => {
      open = false
      done('stalled')
    }, idleMs)
  })
}

const send = (res: ServerResponse, reply: Reply, id: string) => {
  const { body } = reply
  // Object.assign, not a spread: spreading objects of many shapes costs microseconds a request.
  const headers: Record<string, string> = Object.assign({}, reply.headers)
  headers['x-request-id'] = id
  let payload: string | Buffer | undefined
  if (typeof body === 'string' || Buffer.isBuffer(body)) payload = body
  else if (body !== undefined) {
    payload = JSON.stringify(body)
    headers['content-type'] ??= 'application/json'
  }
  if (payload !== undefined) headers['content-length'] = String(Buffer.byteLength(payload))
  res.writeHead(reply.status, headers)
  res.end(payload)
}

const drained = (res: ServerResponse) =>
  new Promise<void>((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })

// A streamed answer (an export, route.ts `streamed`): JSON text written chunk by chunk as it is
// read, each after the one before has drained. Its status is sent first, so a failure midway can
// only break the connection off, which the client sees as a truncated answer; a client that goes
// stops the reading (the iterator's return releases its connection).
const sendStream = async (
  res: ServerResponse,
  reply: Reply,
  chunks: AsyncIterable<string>,
  id: string,
  log: Log,
) => {
  res.writeHead(reply.status, {
    ...reply.headers,
    'content-type': 'application/json',
    'x-request-id': id,
  })
  try {
    for await (const chunk of chunks) {
      if (res.destroyed) break
      if (!res.write(chunk)) await drained(res)
    }
    res.end()
  } catch (err) {
    log('error', 'stream', { id, error: String((err as Error)?.message ?? err) })
    res.destroy()
  }
}
export const isStream = (body: unknown): body is AsyncIterable<string> =>
  typeof body === 'object' && body !== null && Symbol.asyncIterator in body

// The path without its query.
const pathOf = (url: string | undefined) => {
  const query = url?.indexOf('?') ?? -1
  return query < 0 ? url : url?.slice(0, query)
}

// The handlers' view of a request. Its signal is made the first time something reads it (a
// statement's budget, an expensive route's share): most requests never do, and an AbortController
// and a 'close' listener for each were 6% of the CPU of /healthz. A client already gone when the
// signal is first read finds it aborted.
class HttpReq implements Req {
  // HEAD is answered as GET (uptime checkers send it); node:http sends the headers
  // without the body.
  method: string
  url: string
  headers: IncomingMessage['headers']
  params: Record<string, string> = {}
  query: Record<string, string | string[] | undefined> = {}
  address: string | undefined
  #res: ServerResponse
  #gone: AbortController | undefined
  constructor(
    im: IncomingMessage,
    res: ServerResponse,
    public id: string,
    public body: Buffer,
  ) {
    this.method = im.method === 'HEAD' ? 'GET' : (im.method ?? 'GET')
    this.url = `${ORIGIN}${im.url ?? '/'}`
    this.headers = im.headers
    this.address = im.socket.remoteAddress
    this.#res = res
  }
  get signal() {
    if (this.#gone) return this.#gone.signal
    const gone = (this.#gone = new AbortController())
    const res = this.#res
    if (res.destroyed) res.writableFinished || gone.abort()
    else res.once('close', () => res.writableFinished || gone.abort())
    return gone.signal
  }
}

// node:http -> lean Req -> handler -> Reply. Full web Request/Response objects cost about
// five times the throughput on Node 20 (STACK-NOTES), so none are built. A handler that answers
// synchronously is sent in the same tick, without a Promise in between. `essential` lists the
// paths answered to GET on a connection held back by the caps (liveness, readiness).
export const createHttpServer = (
  handle: (req: Req) => Reply | Promise<Reply>,
  log: Log,
  bounds: ClientBounds = DEFAULT_BOUNDS,
  essential: ReadonlySet<string> = new Set(),
): Server => {
  // An error met after the client went is the client's doing (its work was cancelled): only its
  // request line is logged, as 499.
  const unhandled = (err: unknown, id: string, res: ServerResponse) => {
    if (!res.destroyed)
      log('error', 'unhandled', { id, error: String((err as Error)?.stack ?? err) })
    return problem(500, 'An internal error occurred.')
  }
  const finish = (
    im: IncomingMessage,
    res: ServerResponse,
    started: number,
    id: string,
    reply: Reply,
    req?: Req,
  ) => {
    const status = res.destroyed ? CLIENT_GONE : reply.status
    if (status !== CLIENT_GONE) {
      if (isStream(reply.body)) void sendStream(res, reply, reply.body, id, log)
      else send(res, reply, id)
    }
    const ms = performance.now() - started
    observeRequest(im.method ?? 'GET', req?.route, status, ms / 1000)
    // The route's pattern (/api/v1/customer/:external_id), never the path itself: its ids name
    // people, and a log line is beyond an erasure's reach. null when no route matched (a 404, or a
    // request answered before routing).
    const path = req?.route ?? null
    log('info', 'request', { id, method: im.method, path, status, ms: Math.round(ms * 10) / 10 })
  }
  // The answer when no handler runs: the body was too large, stalled or broken off.
  const unread = (body: Exclude<Body, Buffer>): Reply => {
    if (body === 'aborted') return { status: CLIENT_GONE }
    if (body === 'stalled') {
      const detail = `No part of the request body arrived for ${bounds.bodyIdleTimeoutMs} ms.`
      return problem(408, detail, undefined, { connection: 'close' })
    }
    const close = body === 'too large, close' ? { connection: 'close' } : undefined
    return problem(
      413,
      `The request body is larger than ${size(MAX_BODY_BYTES)}.`,
      undefined,
      close,
    )
  }
  const answer = (
    im: IncomingMessage,
    res: ServerResponse,
    started: number,
    id: string,
    body: Body,
  ) => {
    if (!Buffer.isBuffer(body)) return finish(im, res, started, id, unread(body))
    const req = new HttpReq(im, res, id, body)
    let reply: Reply | Promise<Reply>
    try {
      reply = handle(req)
    } catch (err) {
      return finish(im, res, started, id, unhandled(err, id, res), req)
    }
    if (!(reply instanceof Promise)) return finish(im, res, started, id, reply, req)
    reply.then(
      (done) => finish(im, res, started, id, done, req),
      (err) => finish(im, res, started, id, unhandled(err, id, res), req),
    )
  }
  // Timeouts are checked every second (Node's default is every 30 s, which would stretch them).
  const server = createServer({ connectionsCheckingInterval: 1000 })
  const heldBack = guardConnections(server, bounds.maxConnections, bounds.maxConnectionsPerAddress)
  server.on('request', (im: IncomingMessage, res: ServerResponse) => {
    const started = performance.now()
    const id =
      typeof im.headers['x-request-id'] === 'string'
        ? im.headers['x-request-id'].slice(0, 128)
        : randomUUID()
    // A connection held back by the caps answers only the probes, then closes.
    const full = heldBack.get(im.socket)
    if (full !== undefined) {
      res.setHeader('connection', 'close')
      if ((im.method !== 'GET' && im.method !== 'HEAD') || !essential.has(pathOf(im.url) ?? '')) {
        const refused = problem(503, `${full} Try again shortly.`, undefined, {
          'retry-after': '1',
        })
        return finish(im, res, started, id, refused)
      }
    }
    readBody(im, MAX_BODY_BYTES, bounds.bodyIdleTimeoutMs, (body) =>
      answer(im, res, started, id, body),
    )
  })
  server.headersTimeout = bounds.headersTimeoutMs
  server.requestTimeout = bounds.requestTimeoutMs
  server.keepAliveTimeout = bounds.keepAliveTimeoutMs
  return server
}

export const listen = (server: Server, port: number, host: string) =>
  new Promise<number>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      const addr = server.address()
      resolve(typeof addr === 'object' && addr ? addr.port : port)
    })
  })

// Stops accepting, lets in-flight requests finish, then closes idle keep-alive sockets.
export const drain = (server: Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeIdleConnections()
  })
