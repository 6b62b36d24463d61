import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import { problem } from './problem.ts'
import { observeRequest } from '../metrics.ts'
import type { Log } from '../log.ts'
import type { Reply, Req } from './types.ts'

export const MAX_BODY_BYTES = 5 * 1024 * 1024
// A body over the limit is read and thrown away up to this size before the 413 is sent: a client
// (Node's fetch, many proxies) that is still sending when the connection closes reports a network
// error instead of the answer. Beyond it the connection is closed at once.
export const DISCARD_BYTES = 4 * MAX_BODY_BYTES

// How long a client may take: for its headers, its whole request, a pause within its body, and
// between requests on a kept-alive connection; and how many connections the server holds at once.
export interface ClientBounds {
  headersTimeoutMs: number
  requestTimeoutMs: number
  bodyIdleTimeoutMs: number
  keepAliveTimeoutMs: number
  maxConnections: number
}
export const DEFAULT_BOUNDS: ClientBounds = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  bodyIdleTimeoutMs: 10_000,
  keepAliveTimeoutMs: 65_000,
  maxConnections: 1000,
}

type Body = Buffer | 'too large' | 'too large, close' | 'stalled'

// The body; 'too large' when it is over the limit; or 'stalled' when no byte arrived for the idle
// timeout. A body announced over the limit is refused at once, and node:http reads and drops the
// rest of it before the connection's next request; one that turns out too large while it streams
// is read to its end and dropped. Either way only up to DISCARD_BYTES: past that, the connection
// closes ('too large, close').
const readBody = (im: IncomingMessage, limit: number, idleMs: number): Promise<Body> =>
  new Promise((resolve, reject) => {
    const declared = Number(im.headers['content-length'])
    if (declared > DISCARD_BYTES) return resolve('too large, close')
    if (declared > limit) return resolve('too large')
    const chunks: Buffer[] = []
    let size = 0
    let idle = setTimeout(() => resolve('stalled'), idleMs)
    const done = (body: Body) => {
      clearTimeout(idle)
      resolve(body)
    }
    im.on('data', (chunk: Buffer) => {
      size += chunk.length
      clearTimeout(idle)
      idle = setTimeout(() => done('stalled'), idleMs)
      if (size > DISCARD_BYTES) return done('too large, close')
      if (size <= limit) chunks.push(chunk)
    })
    im.on('end', () => done(size > limit ? 'too large' : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
    im.on('error', (err) => {
      clearTimeout(idle)
      reject(err)
    })
  })

const send = (res: ServerResponse, reply: Reply) => {
  const { body } = reply
  const headers: Record<string, string> = { ...reply.headers }
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

// node:http -> lean Req -> handler -> Reply. Full web Request/Response objects cost about
// five times the throughput on Node 20 (STACK-NOTES), so none are built.
export const createHttpServer = (
  handle: (req: Req) => Promise<Reply>,
  log: Log,
  bounds: ClientBounds = DEFAULT_BOUNDS,
): Server => {
  // Timeouts are checked every second (Node's default is every 30 s, which would stretch them).
  const server = createServer({ connectionsCheckingInterval: 1000 }, async (im, res) => {
    const started = performance.now()
    const id = typeof im.headers['x-request-id'] === 'string' ? im.headers['x-request-id'].slice(0, 128) : randomUUID()
    let reply: Reply
    let req: Req | undefined
    try {
      const body = await readBody(im, MAX_BODY_BYTES, bounds.bodyIdleTimeoutMs)
      if (body === 'too large' || body === 'too large, close') {
        const close = body === 'too large, close' ? { connection: 'close' } : undefined
        reply = problem(413, `The request body is larger than ${MAX_BODY_BYTES} bytes.`, undefined, close)
      } else if (body === 'stalled') {
        reply = problem(408, `No part of the request body arrived for ${bounds.bodyIdleTimeoutMs} ms.`, undefined, {
          connection: 'close',
        })
      } else {
        req = {
          id,
          method: im.method ?? 'GET',
          url: `http://local${im.url ?? '/'}`,
          headers: im.headers,
          body,
          params: {},
          query: {},
        }
        reply = await handle(req)
      }
    } catch (err) {
      log('error', 'unhandled', { id, error: String((err as Error)?.stack ?? err) })
      reply = problem(500, 'An internal error occurred.')
    }
    reply.headers = { ...reply.headers, 'x-request-id': id }
    send(res, reply)
    const ms = performance.now() - started
    observeRequest(im.method ?? 'GET', req?.route, reply.status, ms / 1000)
    log('info', 'request', {
      id,
      method: im.method,
      path: im.url?.split('?')[0],
      status: reply.status,
      ms: Math.round(ms * 10) / 10,
    })
  })
  server.headersTimeout = bounds.headersTimeoutMs
  server.requestTimeout = bounds.requestTimeoutMs
  server.keepAliveTimeout = bounds.keepAliveTimeoutMs
  server.maxConnections = bounds.maxConnections
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
