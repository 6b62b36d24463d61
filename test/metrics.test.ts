import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'

let s: TestService
let receiver: Server
before(async () => {
  s = await startTestService()
  receiver = createServer((req, res) => {
    req.resume()
    req.on('end', () => res.end())
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
})
after(async () => {
  receiver?.close()
  await s?.stop()
})

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

// Prometheus text exposition: `name{label="value",...} number` per line, comments skipped.
const parse = (text: string): Sample[] =>
  text
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
      assert.ok(m, `a sample line: ${line}`)
      const labels = Object.fromEntries(
        [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
      )
      return { name: m[1], labels, value: Number(m[3]) }
    })

const scrape = async () => {
  const res = await s.call('GET', '/metrics')
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/)
  const samples = parse(res.body)
  // The value of the one series with these labels (0 when it does not exist yet).
  return (name: string, labels: Record<string, string> = {}) => {
    const found = samples.filter(
      (x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v),
    )
    assert.ok(found.length <= 1, `${name} ${JSON.stringify(labels)} names one series`)
    return found[0]?.value ?? 0
  }
}

test('exposes the listed series, default process metrics included', async () => {
  await s.call('GET', '/healthz')
  const res = await s.call('GET', '/metrics')
  const names = new Set(parse(res.body).map((x) => x.name))
  for (const name of [
    'http_requests_total',
    'http_request_duration_seconds_bucket',
    'http_request_duration_seconds_sum',
    'http_request_duration_seconds_count',
    'service_job_queue_depth',
    'service_webhook_deliveries',
    'service_uploads',
    'process_cpu_user_seconds_total',
    'process_resident_memory_bytes',
    'nodejs_heap_size_used_bytes',
    'nodejs_eventloop_lag_seconds',
  ])
    assert.ok(names.has(name), name)
  for (const status of ['received', 'processing', 'processed', 'failed'])
    assert.match(res.body, new RegExp(`^service_uploads\\{status="${status}"\\} \\d+$`, 'm'))
  // A worker process reports every task it runs, idle ones at 0.
  for (const task of ['process_upload', 'deliver_webhook', 'score_records'])
    assert.match(res.body, new RegExp(`^service_job_queue_depth\\{task="${task}"\\} \\d+$`, 'm'))
  for (const status of ['pending', 'delivered', 'failed'])
    assert.match(
      res.body,
      new RegExp(`^service_webhook_deliveries\\{status="${status}"\\} \\d+$`, 'm'),
    )
})

test('requests are counted and timed by route pattern and status', async () => {
  const { api } = await s.account()
  const before = await scrape()
  const route = { method: 'GET', route: '/api/v1/uploads/:upload_id' }
  for (const id of [101, 102, 103])
    assert.equal((await api(`/api/v1/uploads/${id}`, undefined, 'GET')).status, 404)
  assert.equal((await s.call('GET', '/api/v1/uploads/1')).status, 401)
  assert.equal((await s.call('GET', '/no/such/route')).status, 404)
  const after = await scrape()
  const delta = (name: string, labels: Record<string, string>) =>
    after(name, labels) - before(name, labels)
  assert.equal(delta('http_requests_total', { ...route, status: '404' }), 3)
  assert.equal(delta('http_request_duration_seconds_count', { ...route, status: '404' }), 3)
  assert.equal(
    delta('http_request_duration_seconds_bucket', { ...route, status: '404', le: '+Inf' }),
    3,
  )
  assert.ok(delta('http_request_duration_seconds_sum', { ...route, status: '404' }) > 0)
  assert.equal(delta('http_requests_total', { ...route, status: '401' }), 1)
  assert.equal(
    delta('http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }),
    1,
  )
  // The raw paths never become labels.
  assert.doesNotMatch((await s.call('GET', '/metrics')).body, /uploads\/10[123]|no\/such/)
})

test('jobs, queue depth, uploads and webhook deliveries move when an upload is processed', async () => {
  const account = await scoredAccount(s, 'Metrics')
  const port = (receiver.address() as { port: number }).port
  assert.equal(
    (
      await s.admin('POST', `/accounts/${account.id}/webhooks`, {
        url: `http://127.0.0.1:${port}/`,
        events: ['customer.created'],
      })
    ).status,
    201,
  )
  const before = await scrape()

  // Queued while no worker can take it: a job of a task this worker does not run.
  const [job] = await s.sql`select id from graphile_worker.add_job('metrics_test_task', '{}'::json)`
  const queued = await scrape()
  assert.equal(queued('service_job_queue_depth', { task: 'metrics_test_task' }), 1)

  await uploadAndWait(account.api, 'customers', [
    { external_id: 'm1', name: 'M One' },
    { external_id: 'm2', name: 'M Two' },
  ])
  const deadline = Date.now() + 30_000
  // The receiver answers the webhook; its delivery is marked just before the job returns and is
  // counted (a busy machine may even need a retry, 5 s later), so both are awaited.
  const moved = (m: Awaited<ReturnType<typeof scrape>>) =>
    m('service_webhook_deliveries', { status: 'delivered' }) >
      before('service_webhook_deliveries', { status: 'delivered' }) &&
    m('service_jobs_total', { task: 'deliver_webhook', outcome: 'completed' }) >
      before('service_jobs_total', { task: 'deliver_webhook', outcome: 'completed' })
  let after = await scrape()
  while (!moved(after) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50))
    after = await scrape()
  }

  const delta = (name: string, labels: Record<string, string>) =>
    after(name, labels) - before(name, labels)
  assert.equal(delta('service_jobs_total', { task: 'process_upload', outcome: 'completed' }), 1)
  assert.equal(
    delta('service_job_duration_seconds_count', { task: 'process_upload', outcome: 'completed' }),
    1,
  )
  assert.ok(
    delta('service_job_duration_seconds_sum', { task: 'process_upload', outcome: 'completed' }) > 0,
  )
  assert.ok(delta('service_jobs_total', { task: 'deliver_webhook', outcome: 'completed' }) >= 1)
  assert.equal(delta('service_uploads', { status: 'processed' }), 1)
  assert.equal(after('service_uploads', { status: 'received' }), 0)
  assert.equal(
    delta('service_webhook_deliveries', { status: 'delivered' }),
    1,
    JSON.stringify(await s.sql`select * from webhook_attempts`),
  )
  assert.equal(after('service_job_queue_depth', { task: 'metrics_test_task' }), 1)
  assert.equal(after('service_job_queue_depth', { task: 'process_upload' }), 0)

  await s.sql`select graphile_worker.complete_jobs(array[${job.id}]::bigint[])`
  assert.equal((await scrape())('service_job_queue_depth', { task: 'metrics_test_task' }), 0)
})
