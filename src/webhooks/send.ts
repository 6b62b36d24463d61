import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { PRIVATE_ADDRESS_ERROR, type Resolve, checkWebhookUrl, resolvePublic } from './ssrf.ts'

// A delivery's attempts in one round (its first send and its redeliveries each start one); a
// job's own retries (graphile-worker's maxAttempts) are another count.
export const ATTEMPTS_PER_ROUND = 3

// Only enough of the response is read to let the receiver finish writing; its start is kept for
// the delivery log, where an operator reads why a receiver refused.
const MAX_RESPONSE_BYTES = 64 * 1024
const EXCERPT_CHARACTERS = 500

type Outcome = 'delivered' | 'retry' | 'failed'

export interface SendResult {
  status_code: number | null
  duration_ms: number
  error: string | null
  outcome: Outcome
  /** The start of the response body as text; null without a response. */
  response_excerpt: string | null
}

interface SendOptions {
  url: string
  body: string
  headers: Record<string, string>
  timeoutMs?: number
  allowPrivate: boolean
  /** How the host name is resolved; tests give the answers a DNS server could. */
  resolve?: Resolve
}

// 5 s after the first attempt, 25 s after the second; jitter keeps many failing
// deliveries to one receiver from retrying in lockstep.
export const retryDelaySeconds = (attempt: number, random: () => number = Math.random) =>
  5 ** attempt * (0.8 + 0.4 * random())

// 3xx counts as permanent because following redirects would bypass the SSRF check.
const outcomeOf = (status: number): Outcome => {
  if (status >= 200 && status < 300) return 'delivered'
  if (status >= 500) return 'retry'
  return 'failed'
}

// Hands the already-vetted address to the socket whatever name it asks for, in either
// callback shape (autoSelectFamily asks for all addresses).
const pinnedLookup =
  (address: string, family: number): LookupFunction =>
  (_hostname, options, callback) => {
    if (options.all) callback(null, [{ address, family }])
    else callback(null, address, family)
  }

interface Attempt {
  status_code: number | null
  error: string | null
  response_excerpt: string | null
}

const post = (
  url: URL,
  body: string,
  headers: Record<string, string>,
  target: { address: string; family: number },
  timeoutMs: number,
) =>
  new Promise<Attempt>((resolve) => {
    let status: number | null = null
    const chunks: Buffer[] = []
    // Once the status line has arrived the receiver has decided; a slow or broken body
    // afterwards does not change the outcome, so its error is dropped.
    const settle = (error: string | null) => {
      clearTimeout(timer)
      req.destroy()
      const text = status === null ? null : Buffer.concat(chunks).toString('utf8')
      resolve({
        status_code: status,
        error: status === null ? error : null,
        response_excerpt: text === null ? null : [...text].slice(0, EXCERPT_CHARACTERS).join(''),
      })
    }
    const req = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      // A fresh connection per attempt: a pooled socket could outlive the address check.
      agent: false,
      lookup: pinnedLookup(target.address, target.family),
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'Service-Webhook/1.0',
        'Content-Length': String(Buffer.byteLength(body)),
        ...headers,
      },
    })
    const timer = setTimeout(() => settle(`timeout after ${timeoutMs} ms`), timeoutMs)
    req.on('error', (err) => settle(err.message))
    req.on('response', (res) => {
      status = res.statusCode ?? null
      let received = 0
      res.on('data', (chunk: Buffer) => {
        if (received < EXCERPT_CHARACTERS * 4) chunks.push(chunk)
        received += chunk.length
        if (received >= MAX_RESPONSE_BYTES) settle(null)
      })
      res.on('end', () => settle(null))
      res.on('error', (err) => settle(err.message))
    })
    req.end(body)
  })

const resolveTarget = async (url: URL, allowPrivate: boolean, resolve?: Resolve) => {
  try {
    return { target: await resolvePublic(url.hostname, allowPrivate, resolve) }
  } catch (err) {
    const error = err as NodeJS.ErrnoException
    // A private address is a configuration problem, a DNS failure may be transient.
    return {
      error: error.message,
      outcome: error.code === PRIVATE_ADDRESS_ERROR ? 'failed' : 'retry',
    } as const
  }
}

// Never throws: every way an attempt can end becomes a result row for webhook_attempts.
export const sendWebhook = async ({
  url,
  body,
  headers,
  timeoutMs = 10_000,
  allowPrivate,
  resolve,
}: SendOptions): Promise<SendResult> => {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  const refusal = checkWebhookUrl(url, allowPrivate)
  if (refusal)
    return {
      status_code: null,
      duration_ms: elapsed(),
      error: refusal,
      outcome: 'failed',
      response_excerpt: null,
    }
  const parsed = new URL(url)
  const resolved = await resolveTarget(parsed, allowPrivate, resolve)
  if (!resolved.target) {
    const { error, outcome } = resolved
    return { status_code: null, duration_ms: elapsed(), error, outcome, response_excerpt: null }
  }
  // request() throws synchronously on malformed headers; that must still end as a result.
  const attempt = await post(parsed, body, headers, resolved.target, timeoutMs).catch(
    (err: Error): Attempt => ({ status_code: null, error: err.message, response_excerpt: null }),
  )
  const outcome = attempt.status_code === null ? 'retry' : outcomeOf(attempt.status_code)
  return { ...attempt, duration_ms: elapsed(), outcome }
}
