import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, describe, test } from 'node:test'
import { verify } from '@octokit/webhooks-methods'
import { Webhook } from 'standardwebhooks'
import * as v from 'valibot'
import {
  BATCH_SIZE,
  buildPayloads,
  EVENTS,
  listEventTypes,
  type EventItem,
  PAYLOADS,
} from '../src/webhooks/events.ts'
import { generateSecret, hmacHeader, standardWebhookHeaders } from '../src/webhooks/sign.ts'
import { checkWebhookUrl, isPrivateAddress, resolvePublic } from '../src/webhooks/ssrf.ts'
import { ATTEMPTS_PER_ROUND, retryDelaySeconds, sendWebhook } from '../src/webhooks/send.ts'

type CreatedCustomer = EventItem<'customer.created'>
const buildCustomerCreatedPayloads = (
  items: CreatedCustomer[],
  source: string,
  timestamp: string,
) => buildPayloads('customer.created', items, timestamp, { source })

const customers = (n: number): CreatedCustomer[] =>
  Array.from({ length: n }, (_, i) => ({
    service_id: i + 1,
    external_id: `ext-${i + 1}`,
    name: i % 3 === 0 ? null : `Customer ${i + 1}`,
    created_at: new Date(Date.UTC(2024, 0, 1, 0, 0, 0, i)).toISOString(),
  }))

describe('buildCustomerCreatedPayloads', () => {
  const timestamp = '2024-05-06T07:08:09.123Z'

  test('empty input sends nothing', () => {
    assert.deepEqual(buildCustomerCreatedPayloads([], 'API', timestamp), [])
  })

  for (const n of [1, 1000, 1001, 2500]) {
    test(`${n} customers`, () => {
      const input = customers(n)
      const bodies = buildCustomerCreatedPayloads(input, 'API', timestamp)
      const expectedBatches = Math.ceil(n / BATCH_SIZE)
      assert.equal(bodies.length, expectedBatches)
      const seen: CreatedCustomer[] = []
      bodies.forEach((body, i) => {
        const payload = JSON.parse(body)
        assert.deepEqual(Object.keys(payload), ['event', 'timestamp', 'data'])
        assert.equal(payload.event, 'customer.created')
        assert.equal(payload.timestamp, timestamp)
        assert.deepEqual(Object.keys(payload.data), ['source', 'customers', 'batch'])
        assert.equal(payload.data.source, 'API')
        assert.deepEqual(Object.keys(payload.data.batch), [
          'current_batch',
          'total_batches',
          'total_customers',
          'batch_size',
        ])
        assert.equal(payload.data.batch.current_batch, i + 1)
        assert.equal(payload.data.batch.total_batches, expectedBatches)
        assert.equal(payload.data.batch.total_customers, n)
        assert.equal(payload.data.batch.batch_size, payload.data.customers.length)
        assert.ok(payload.data.batch.batch_size <= BATCH_SIZE)
        for (const c of payload.data.customers) {
          assert.deepEqual(Object.keys(c), ['service_id', 'external_id', 'name', 'created_at'])
          seen.push(c)
        }
      })
      assert.deepEqual(seen, input)
      const sizes = bodies.map((b) => JSON.parse(b).data.batch.batch_size)
      assert.equal(
        sizes.reduce((a, b) => a + b, 0),
        n,
      )
      if (n === 2500) assert.deepEqual(sizes, [1000, 1000, 500])
      if (n === 1001) assert.deepEqual(sizes, [1000, 1])
    })
  }

  test('extra row fields are not copied and nulls and empty names are kept', () => {
    const row = { service_id: 7, external_id: 'x', name: '', created_at: timestamp, account_id: 1 }
    const rows = [row, { ...row, service_id: 8, name: null }] as CreatedCustomer[]
    const [body] = buildCustomerCreatedPayloads(rows, 'HUBSPOT', timestamp)
    assert.equal(
      body,
      `{"event":"customer.created","timestamp":"${timestamp}","data":{"source":"HUBSPOT","customers":[` +
        `{"service_id":7,"external_id":"x","name":"","created_at":"${timestamp}"},` +
        `{"service_id":8,"external_id":"x","name":null,"created_at":"${timestamp}"}],` +
        `"batch":{"current_batch":1,"total_batches":1,"total_customers":2,"batch_size":2}}}`,
    )
  })
})

describe('the event catalog', () => {
  test('every event has a description, a schema and an example that passes it', () => {
    assert.deepEqual(
      listEventTypes().map((e) => e.name),
      EVENTS,
    )
    for (const e of listEventTypes()) {
      assert.ok(e.description.length > 10, e.name)
      const result = v.safeParse(PAYLOADS[e.name], e.example)
      assert.ok(
        result.success,
        `${e.name}: ${JSON.stringify(result.issues?.map((i) => i.message))}`,
      )
    }
  })

  test('a payload missing a field or with a wrong event name fails its schema', () => {
    const [example] = listEventTypes().filter((e) => e.name === 'customer.score_changed')
    const broken = structuredClone(example.example)
    delete broken.data.changes[0].new_value
    assert.equal(v.safeParse(PAYLOADS['customer.score_changed'], broken).success, false)
    assert.equal(v.safeParse(PAYLOADS['customer.churned'], example.example).success, false)
  })

  test('each event names its list and total after it, chunked by 1000', () => {
    const items = Array.from({ length: 1500 }, (_, i) => ({
      service_id: i,
      contact_external_id: `c${i}`,
      name: null,
      customer_external_id: 'acme',
      created_at: '2024-01-01T00:00:00.000Z',
      extra: 'dropped',
    }))
    const bodies = buildPayloads('contact.created', items, '2024-01-01T00:00:00.000Z', {
      source: 'FILE',
    })
    assert.equal(bodies.length, 2)
    const second = JSON.parse(bodies[1])
    assert.deepEqual(Object.keys(second.data), ['source', 'contacts', 'batch'])
    assert.deepEqual(second.data.batch, {
      current_batch: 2,
      total_batches: 2,
      total_contacts: 1500,
      batch_size: 500,
    })
    assert.equal(second.data.contacts[0].extra, undefined)
    assert.ok(v.safeParse(PAYLOADS['contact.created'], second).success)
  })
})

describe('signatures', () => {
  const body = buildCustomerCreatedPayloads(
    [
      {
        service_id: 1,
        external_id: 'a',
        name: 'Zoë Ünïcødé 東京',
        created_at: '2024-01-01T00:00:00.000Z',
      },
    ],
    'API',
    '2024-01-01T00:00:00.000Z',
  )[0]
  const tampered = body.replace('Zoë', 'Zoe')

  test('secret has the whsec_ prefix and 24 random bytes', () => {
    const secret = generateSecret()
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/)
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 24)
    assert.notEqual(generateSecret(), secret)
  })

  test('X-service-HMAC verifies with @octokit/webhooks-methods over the exact bytes', async () => {
    const secret = generateSecret()
    const header = hmacHeader(secret, body)
    assert.match(header, /^sha256=[0-9a-f]{64}$/)
    assert.equal(hmacHeader(secret, Buffer.from(body, 'utf8')), header)
    assert.equal(await verify(secret, body, header), true)
    assert.equal(await verify(secret, tampered, header), false)
    assert.equal(await verify(generateSecret(), body, header), false)
  })

  test('Standard Webhooks headers verify with the standardwebhooks package', () => {
    const secret = generateSecret()
    const now = Math.floor(Date.now() / 1000)
    const headers = standardWebhookHeaders([secret], 'msg_123', now, body)
    assert.equal(headers['webhook-id'], 'msg_123')
    assert.equal(headers['webhook-timestamp'], String(now))
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/)
    assert.deepEqual(standardWebhookHeaders([secret], 'msg_123', now, Buffer.from(body)), headers)
    const wh = new Webhook(secret)
    assert.deepEqual(wh.verify(body, headers), JSON.parse(body))
    assert.deepEqual(wh.verify(Buffer.from(body), headers), JSON.parse(body))
    assert.throws(() => wh.verify(tampered, headers))
    assert.throws(() => wh.verify(body, { ...headers, 'webhook-id': 'msg_124' }))
    assert.throws(() => wh.verify(body, { ...headers, 'webhook-timestamp': String(now + 1) }))
    assert.throws(() => new Webhook(generateSecret()).verify(body, headers))
  })

  test('during a rotation both signatures travel, and either secret alone verifies', () => {
    const [next, old] = [generateSecret(), generateSecret()]
    const now = Math.floor(Date.now() / 1000)
    const headers = standardWebhookHeaders([next, old], 'msg_123', now, body)
    const [first, second] = headers['webhook-signature'].split(' ')
    assert.equal(first, standardWebhookHeaders([next], 'msg_123', now, body)['webhook-signature'])
    assert.equal(second, standardWebhookHeaders([old], 'msg_123', now, body)['webhook-signature'])
    for (const secret of [next, old])
      assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body))
    assert.throws(() => new Webhook(generateSecret()).verify(body, headers))
  })
})

describe('isPrivateAddress', () => {
  const cases: [string, boolean][] = [
    ['127.0.0.1', true],
    ['127.255.255.254', true],
    ['10.0.0.1', true],
    ['10.255.255.255', true],
    ['172.16.0.1', true],
    ['172.31.255.255', true],
    ['172.15.255.255', false],
    ['172.32.0.0', false],
    ['192.168.1.1', true],
    ['192.169.0.1', false],
    ['169.254.169.254', true],
    ['0.0.0.0', true],
    ['0.1.2.3', true],
    ['100.64.0.1', true],
    ['100.127.255.255', true],
    ['100.128.0.0', false],
    ['224.0.0.1', true],
    ['239.255.255.250', true],
    ['255.255.255.255', true],
    ['8.8.8.8', false],
    ['1.1.1.1', false],
    ['93.184.216.34', false],
    ['::1', true],
    ['::', true],
    ['0:0:0:0:0:0:0:1', true],
    ['fe80::1', true],
    ['FE80::abcd', true],
    ['febf:ffff::1', true],
    ['fec0::1', true],
    ['fc00::1', true],
    ['fd12:3456::1', true],
    ['ff02::1', true],
    ['::ffff:127.0.0.1', true],
    ['::ffff:7f00:1', true],
    ['::ffff:10.1.2.3', true],
    ['::ffff:169.254.169.254', true],
    ['::ffff:8.8.8.8', false],
    ['2001:4860:4860::8888', false],
    ['2606:4700:4700::1111', false],
    ['not-an-ip', true],
    ['', true],
  ]
  for (const [ip, expected] of cases) {
    test(`${ip || '(empty)'} -> ${expected}`, () => assert.equal(isPrivateAddress(ip), expected))
  }
})

describe('checkWebhookUrl', () => {
  const cases: [string, boolean, boolean][] = [
    // url, allowPrivate, accepted
    ['https://example.com/hook', false, true],
    ['https://example.com:8443/hook?x=1', false, true],
    ['https://8.8.8.8/hook', false, true],
    ['http://example.com/hook', false, false],
    ['ftp://example.com/hook', false, false],
    ['not a url', false, false],
    ['/relative/path', false, false],
    ['https://localhost/hook', false, false],
    ['https://LOCALHOST./hook', false, false],
    ['https://api.localhost/hook', false, false],
    ['https://127.0.0.1/hook', false, false],
    ['https://0x7f.1/hook', false, false],
    ['https://2130706433/hook', false, false],
    ['https://10.0.0.5/hook', false, false],
    ['https://169.254.169.254/latest/meta-data', false, false],
    ['https://[::1]/hook', false, false],
    ['https://[::ffff:127.0.0.1]/hook', false, false],
    ['https://[fe80::1]/hook', false, false],
    ['https://[2001:4860:4860::8888]/hook', false, true],
    ['http://127.0.0.1:3000/hook', true, true],
    ['http://localhost:3000/hook', true, true],
    ['https://10.0.0.5/hook', true, true],
    ['ftp://127.0.0.1/hook', true, false],
    ['not a url', true, false],
  ]
  for (const [url, allowPrivate, accepted] of cases) {
    test(`${url} (allowPrivate ${allowPrivate}) -> ${accepted ? 'ok' : 'refused'}`, () => {
      const error = checkWebhookUrl(url, allowPrivate)
      if (accepted) assert.equal(error, null)
      else assert.equal(typeof error, 'string')
    })
  }
})

describe('resolvePublic', () => {
  test('refuses a name resolving to loopback', async () => {
    await assert.rejects(resolvePublic('localhost', false), /private address/)
  })
  test('allows it when private addresses are allowed', async () => {
    const { address } = await resolvePublic('localhost', true)
    assert.equal(isPrivateAddress(address), true)
  })
})

describe('retryDelaySeconds', () => {
  test('about 5 s then 25 s with +-20% jitter', () => {
    assert.equal(ATTEMPTS_PER_ROUND, 3)
    assert.equal(
      retryDelaySeconds(1, () => 0.5),
      5,
    )
    assert.equal(
      retryDelaySeconds(2, () => 0.5),
      25,
    )
    assert.equal(
      retryDelaySeconds(1, () => 0),
      4,
    )
    assert.ok(Math.abs(retryDelaySeconds(2, () => 0.999999) - 30) < 0.001)
    for (let i = 0; i < 200; i++) {
      const first = retryDelaySeconds(1)
      const second = retryDelaySeconds(2)
      assert.ok(first >= 4 && first <= 6, String(first))
      assert.ok(second >= 20 && second <= 30, String(second))
    }
  })
})

interface Received {
  method: string
  url: string
  headers: http.IncomingHttpHeaders
  body: Buffer
}

const servers: http.Server[] = []
after(() => {
  for (const s of servers) {
    s.closeAllConnections()
    s.close()
  }
})

// A real server whose handler sees the fully received request.
const listen = async (
  handler: (req: Received, res: http.ServerResponse) => void,
  host = '127.0.0.1',
): Promise<{ port: number; requests: Received[] }> => {
  const requests: Received[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const received = {
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: Buffer.concat(chunks),
      }
      requests.push(received)
      handler(received, res)
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  return { port: (server.address() as AddressInfo).port, requests }
}

const respond =
  (status: number, body = '', headers: http.OutgoingHttpHeaders = {}) =>
  (_req: Received, res: http.ServerResponse) => {
    res.writeHead(status, headers)
    res.end(body)
  }

describe('sendWebhook', () => {
  const body = '{"event":"customer.created","data":{"name":"Zoë"}}'

  test('200 is delivered with the documented method, headers and exact body bytes', async () => {
    const { port, requests } = await listen(respond(200, 'ok'))
    const secret = generateSecret()
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/hooks/in?x=1`,
      body,
      headers: { 'X-service-HMAC': hmacHeader(secret, body), 'webhook-id': 'msg_1' },
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'delivered')
    assert.equal(result.status_code, 200)
    assert.equal(result.error, null)
    assert.ok(Number.isInteger(result.duration_ms) && result.duration_ms >= 0)
    assert.equal(requests.length, 1)
    const [req] = requests
    assert.equal(req.method, 'POST')
    assert.equal(req.url, '/hooks/in?x=1')
    assert.equal(req.headers['content-type'], 'application/json')
    assert.equal(req.headers['user-agent'], 'Service-Webhook/1.0')
    assert.equal(req.headers['content-length'], String(Buffer.byteLength(body)))
    assert.equal(req.headers['webhook-id'], 'msg_1')
    assert.deepEqual(req.body, Buffer.from(body, 'utf8'))
    assert.equal(
      await verify(secret, req.body.toString('utf8'), req.headers['x-service-hmac'] as string),
      true,
    )
  })

  test('a host name connects through the pinned resolved address', async () => {
    const { address } = await resolvePublic('localhost', true)
    const { port, requests } = await listen(respond(204), address)
    const result = await sendWebhook({
      url: `http://localhost:${port}/`,
      body,
      headers: {},
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'delivered')
    assert.equal(result.status_code, 204)
    assert.equal(requests.length, 1)
  })

  test('a large response body is not read past the cap', async () => {
    const { port } = await listen(respond(200, 'x'.repeat(1024 * 1024)))
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/`,
      body,
      headers: {},
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'delivered')
    assert.equal(result.status_code, 200)
  })

  test('500 is retried', async () => {
    const { port } = await listen(respond(500, 'boom'))
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/`,
      body,
      headers: {},
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'retry')
    assert.equal(result.status_code, 500)
  })

  test('404 is permanent', async () => {
    const { port } = await listen(respond(404))
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/`,
      body,
      headers: {},
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'failed')
    assert.equal(result.status_code, 404)
  })

  test('302 is permanent and not followed', async () => {
    const { port, requests } = await listen((req, res) => {
      if (req.url === '/start')
        respond(302, '', { Location: `http://127.0.0.1:${port}/target` })(req, res)
      else respond(200)(req, res)
    })
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/start`,
      body,
      headers: {},
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'failed')
    assert.equal(result.status_code, 302)
    assert.deepEqual(
      requests.map((r) => r.url),
      ['/start'],
    )
  })

  test('a receiver that never answers times out and is retried', async () => {
    const { port, requests } = await listen(() => {})
    const started = Date.now()
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/`,
      body,
      headers: {},
      timeoutMs: 300,
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'retry')
    assert.equal(result.status_code, null)
    assert.match(result.error ?? '', /timeout/)
    assert.ok(Date.now() - started < 2000)
    assert.ok(result.duration_ms >= 250)
    assert.equal(requests.length, 1)
  })

  test('a closed port is a retried connection error', async () => {
    const server = http.createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    await new Promise((resolve) => server.close(resolve))
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/`,
      body,
      headers: {},
      allowPrivate: true,
    })
    assert.equal(result.outcome, 'retry')
    assert.equal(result.status_code, null)
    assert.match(result.error ?? '', /ECONNREFUSED/)
  })

  test('private targets are refused without connecting unless allowed', async () => {
    const { port, requests } = await listen(respond(200))
    for (const url of [
      `http://127.0.0.1:${port}/`,
      `https://127.0.0.1:${port}/`,
      `https://localhost:${port}/`,
      `https://[::ffff:127.0.0.1]:${port}/`,
    ]) {
      const result = await sendWebhook({ url, body, headers: {}, allowPrivate: false })
      assert.equal(result.outcome, 'failed', url)
      assert.equal(result.status_code, null, url)
      assert.equal(typeof result.error, 'string', url)
    }
    assert.equal(requests.length, 0)
  })

  test('malformed headers end as a result instead of throwing', async () => {
    const { port, requests } = await listen(respond(200))
    const result = await sendWebhook({
      url: `http://127.0.0.1:${port}/`,
      body,
      headers: { 'X-Bad': 'a\r\nInjected: 1' },
      allowPrivate: true,
    })
    assert.equal(result.status_code, null)
    assert.equal(typeof result.error, 'string')
    assert.equal(requests.length, 0)
  })
})
