import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Received {
  arrived: number
  method: string
  headers: http.IncomingHttpHeaders
  // Exactly the bytes that came over the wire, for signature checks.
  raw: Buffer
  json: any
}

// The status (and optionally a body) to answer the n-th request (1-based) with; a promise
// delays the answer.
type Answer = number | { status: number; body: string }
export type Responder = (req: Received, n: number) => Answer | Promise<Answer>

// A real webhook subscriber on loopback that keeps every request it gets. A given `port` brings a
// closed receiver back at the URL its webhook was registered with.
export const startReceiver = async (respond: Responder = () => 200, port = 0) => {
  const requests: Received[] = []
  const waiters = new Set<{ count: number; resolve: () => void }>()
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const raw = Buffer.concat(chunks)
      const received = {
        arrived: performance.now(),
        method: req.method!,
        headers: req.headers,
        raw,
        json: JSON.parse(raw.toString('utf8')),
      }
      requests.push(received)
      for (const w of waiters)
        if (requests.length >= w.count) {
          waiters.delete(w)
          w.resolve()
        }
      const answer = await respond(received, requests.length)
      const [status, body] = typeof answer === 'number' ? [answer] : [answer.status, answer.body]
      if (!res.destroyed) res.writeHead(status).end(body)
    })
  })
  await new Promise<void>((resolve, reject) =>
    server.once('error', reject).listen(port, '127.0.0.1', resolve),
  )
  const bound = (server.address() as AddressInfo).port
  return {
    port: bound,
    url: `http://127.0.0.1:${bound}/hooks`,
    requests,
    // Resolves as soon as `count` requests have arrived (no polling delay, for latency figures).
    waitFor: (count: number, timeoutMs = 60_000) =>
      new Promise<void>((resolve, reject) => {
        if (requests.length >= count) return resolve()
        const timer = setTimeout(() => {
          waiters.delete(waiter)
          reject(new Error(`${requests.length} of ${count} requests arrived`))
        }, timeoutMs)
        const waiter = {
          count,
          resolve: () => {
            clearTimeout(timer)
            resolve()
          },
        }
        waiters.add(waiter)
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>

// Polls until check() returns something truthy.
type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>

export const eventually = async <T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 30_000,
): Promise<Truthy<T>> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value as Truthy<T>
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
