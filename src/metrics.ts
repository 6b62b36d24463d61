import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { Task, TaskList } from 'graphile-worker'
import type { Sql } from './db/client.ts'

// One registry per process: each `serve` or `worker` process exposes its own counters, and the
// gauges read from the database show the same cluster-wide numbers whichever process is scraped.
export const registry = new Registry()
collectDefaultMetrics({ register: registry })

const httpRequests = new Counter({
  name: 'http_requests_total',
  help: 'HTTP requests answered, by method, route pattern and status.',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
})
const httpDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'Time from the request arriving to the answer sent, by method, route pattern and status.',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
})

// Label objects are made once per (method, route, status) and reused, so a request costs one
// string key and a map lookup on top of the two observations.
type HttpLabels = { method: string; route: string; status: string }
const httpLabels = new Map<string, HttpLabels>()

// `route` is the routing table's pattern (req.route), never the raw path, so the series stay
// few; requests that match no route (404, 405, 413 before routing) share 'unmatched'.
export const observeRequest = (method: string, route: string | undefined, status: number, seconds: number) => {
  const key = `${method} ${route} ${status}`
  let labels = httpLabels.get(key)
  if (!labels) httpLabels.set(key, (labels = { method, route: route ?? 'unmatched', status: String(status) }))
  httpRequests.inc(labels)
  httpDuration.observe(labels, seconds)
}

const jobs = new Counter({
  name: 'service_jobs_total',
  help: 'Background jobs run by this process, by task and outcome (completed or failed).',
  labelNames: ['task', 'outcome'] as const,
  registers: [registry],
})
const jobDuration = new Histogram({
  name: 'service_job_duration_seconds',
  help: 'Run time of background jobs, by task and outcome.',
  labelNames: ['task', 'outcome'] as const,
  registers: [registry],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
})

const timed =
  (name: string, task: Task): Task =>
  async (payload, helpers) => {
    const started = performance.now()
    const observe = (outcome: 'completed' | 'failed') => {
      jobs.inc({ task: name, outcome })
      jobDuration.observe({ task: name, outcome }, (performance.now() - started) / 1000)
    }
    try {
      const result = await task(payload, helpers)
      observe('completed')
      return result
    } catch (err) {
      observe('failed')
      throw err
    }
  }

const queueDepth = new Gauge({
  name: 'service_job_queue_depth',
  help: 'Jobs waiting to run (not locked, attempts left), by task, in the whole database.',
  labelNames: ['task'] as const,
  registers: [registry],
})
const webhookDeliveries = new Gauge({
  name: 'service_webhook_deliveries',
  help: 'Webhook deliveries by outcome (pending, delivered, failed), in the whole database.',
  labelNames: ['status'] as const,
  registers: [registry],
})
const uploads = new Gauge({
  name: 'service_uploads',
  help: 'Uploads by state (received, processing, processed, failed), in the whole database.',
  labelNames: ['status'] as const,
  registers: [registry],
})

const stuckUploads = new Gauge({
  name: 'service_uploads_stuck',
  help: 'Uploads received or processing for longer than SERVICE_STUCK_UPLOAD_SECONDS, by state, in the whole database.',
  labelNames: ['status'] as const,
  registers: [registry],
})

// The gauges are read from the database at scrape time, all with one statement. These are
// operator counts across all accounts, the one place where a query is not scoped by account.
const databaseCounts = (sql: Sql, stuckSeconds: number) => sql<
  { gauge: 'queue' | 'deliveries' | 'uploads' | 'stuck'; label: string; n: number }[]
>`
  select 'queue' as gauge, task_identifier as label, count(*)::int as n from graphile_worker.jobs
  where locked_at is null and attempts < max_attempts group by task_identifier
  union all
  select 'deliveries', status, count(*)::int from webhook_deliveries group by status
  union all
  select 'uploads', status, count(*)::int from uploads group by status
  union all
  select 'stuck', status, count(*)::int from uploads
  where status in ('received', 'processing') and received_at < now() - make_interval(secs => ${stuckSeconds})
  group by status`

// A label seen once keeps being reported (as 0 when no rows remain), so series do not vanish
// when a queue empties; the states the schema allows start at 0.
const gauges = {
  queue: { gauge: queueDepth as Gauge<string>, label: 'task', seen: new Set<string>() },
  deliveries: {
    gauge: webhookDeliveries as Gauge<string>,
    label: 'status',
    seen: new Set(['pending', 'delivered', 'failed']),
  },
  uploads: {
    gauge: uploads as Gauge<string>,
    label: 'status',
    seen: new Set(['received', 'processing', 'processed', 'failed']),
  },
  stuck: { gauge: stuckUploads as Gauge<string>, label: 'status', seen: new Set(['received', 'processing']) },
}

// Wraps every task of the list once, so tasks need not know about metrics; a worker process also
// reports the queue depth of each of its tasks from the start.
export const instrumentTasks = (tasks: TaskList): TaskList => {
  for (const name of Object.keys(tasks)) gauges.queue.seen.add(name)
  return Object.fromEntries(Object.entries(tasks).map(([name, task]) => [name, timed(name, task!)]))
}

const refreshDatabaseGauges = async (sql: Sql, stuckSeconds: number) => {
  const rows = await databaseCounts(sql, stuckSeconds)
  for (const { gauge, label, seen } of Object.values(gauges)) for (const value of seen) gauge.set({ [label]: value }, 0)
  for (const row of rows) {
    const { gauge, label, seen } = gauges[row.gauge]
    seen.add(row.label)
    gauge.set({ [label]: row.label }, row.n)
  }
}

export const renderMetrics = async (sql: Sql, stuckSeconds: number) => {
  await refreshDatabaseGauges(sql, stuckSeconds)
  return { contentType: registry.contentType, text: await registry.metrics() }
}
