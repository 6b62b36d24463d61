import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import { problem } from './problem.ts'
import { observeRequest } from '../metrics.ts'
import type { Log } from '../log.ts'
import type { Reply, Req } from './types.ts'

export const MAX_BODY_BYTES = 5 * 1024 * 1024

// Resolves with the body, or null as soon as it passes the limit (the rest is never read).
const readBody = (im: IncomingMessage, limit: number): Promise<Buffer | null> =>
  new Promise((resolve, reject) => {
    if (Number(im.headers['content-length']) > limit) return resolve(null)
    const chunks: Buffer[] = []
    let size = 0
    im.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        im.removeAllListeners('data')
        im.pause()
        return resolve(null)
      }
      chunks.push(chunk)
    })
    im.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
    im.on('error', reject)
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
export const createHttpServer = (handle: (req: Req) => Promise<Reply>, log: Log): Server => {
  const server = createServer(async (im, res) => {
    const started = performance.now()
    const id = typeof im.headers['x-request-id'] === 'string' ? im.headers['x-request-id'].slice(0, 128) : randomUUID()
    let reply: Reply
    let req: Req | undefined
    try {
      const body = await readBody(im, MAX_BODY_BYTES)
      if (body === null) {
        reply = problem(413, `The request body is larger than ${MAX_BODY_BYTES} bytes.`, undefined, {
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
  server.keepAliveTimeout = 65_000
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
