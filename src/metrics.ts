import {
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  type Metric,
  Registry,
} from 'prom-client'
import type { Sql } from './db/client.ts'
import { waitingJobsByTask } from './db/queue.ts'
import { stuckSql, PENDING_STATES, UPLOAD_STATES } from './uploads/lifecycle.ts'

// One registry per process: each `serve` or `worker` process exposes its own counters, and the
// gauges read from the database show the same cluster-wide numbers whichever process is scraped.
export const registry = new Registry()
collectDefaultMetrics({ register: registry })

// The requests' counter and duration histogram are kept here and rendered by the registry as its
// own Counter and Histogram would render them. Theirs cost some 3.5 µs a request (each inc() and
// observe() hashes and checks the labels and keys its bucket by the bound's text); these cost a
// map lookup and a few additions.
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
type HttpLabels = { method: string; route: string; status: string }
// buckets[i] counts the durations over the bound before DURATION_BUCKETS[i] and up to it.
type RequestSeries = { labels: HttpLabels; count: number; sum: number; buckets: number[] }
const requestSeries = new Map<string, RequestSeries>()

// `route` is the routing table's pattern (req.route), never the raw path, so the series stay
// few; requests that match no route (404, 405, 413 before routing) share 'unmatched'.
export const observeRequest = (
  method: string,
  route: string | undefined,
  status: number,
  seconds: number,
) => {
  const key = `${method} ${route} ${status}`
  let series = requestSeries.get(key)
  if (!series) {
    const labels = { method, route: route ?? 'unmatched', status: String(status) }
    requestSeries.set(
      key,
      (series = { labels, count: 0, sum: 0, buckets: DURATION_BUCKETS.map(() => 0) }),
    )
  }
  series.count++
  series.sum += seconds
  const bucket = DURATION_BUCKETS.findIndex((le) => seconds <= le)
  if (bucket >= 0) series.buckets[bucket]++
}

type Sample = { metricName?: string; labels: Record<string, string | number>; value: number }

// What the registry reads of a metric to render it (prom-client's Registry.getMetricsAsString).
const requestMetric = (
  name: string,
  help: string,
  type: 'counter' | 'histogram',
  samples: () => Sample[],
) => {
  const metric = { name, help, type, aggregator: 'sum', reset: () => requestSeries.clear() }
  // prom-client declares `type` a numeric enum, but its registry reads and prints the text.
  registry.registerMetric({
    ...metric,
    get: async () => ({ ...metric, values: samples() }),
  } as unknown as Metric)
}
requestMetric(
  'http_requests_total',
  'HTTP requests answered, by method, route pattern and status.',
  'counter',
  () => [...requestSeries.values()].map(({ labels, count }) => ({ labels, value: count })),
)
requestMetric(
  'http_request_duration_seconds',
  'Time from the request arriving to the answer sent, by method, route pattern and status.',
  'histogram',
  () =>
    [...requestSeries.values()].flatMap(({ labels, count, sum, buckets }) => {
      let upTo = 0
      const bucket = (le: number | string, value: number) => ({
        metricName: 'http_request_duration_seconds_bucket',
        labels: { le, ...labels },
        value,
      })
      return [
        ...DURATION_BUCKETS.map((le, i) => bucket(le, (upTo += buckets[i]))),
        bucket('+Inf', count),
        { metricName: 'http_request_duration_seconds_sum', labels, value: sum },
        { metricName: 'http_request_duration_seconds_count', labels, value: count },
      ]
    }),
)

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

// A job's outcome, counted and timed: jobs/tasks.ts reports every job here.
export const observeJob = (task: string, outcome: 'completed' | 'failed', seconds: number) => {
  jobs.inc({ task, outcome })
  jobDuration.observe({ task, outcome }, seconds)
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

const retentionPurged = new Gauge({
  name: 'service_retention_purged_rows',
  help: 'Rows purged by the daily retention run since the database began (events deleted, delivery payloads dropped).',
  labelNames: ['kind'] as const,
  registers: [registry],
})
const retentionOldest = new Gauge({
  name: 'service_retention_oldest_kept_timestamp_seconds',
  help: 'When the oldest row the last retention run kept was received or created (Unix time; 0: none kept).',
  labelNames: ['kind'] as const,
  registers: [registry],
})

type CountRow = {
  gauge: 'queue' | 'deliveries' | 'uploads' | 'stuck' | 'purged' | 'oldest'
  label: string
  n: number
}

// The gauges are read from the database at scrape time, all with one statement. These are
// operator counts across all accounts, the one place where a query is not scoped by account.
const databaseCounts = (sql: Sql, stuckSeconds: number) => sql<CountRow[]>`
  select 'queue' as gauge, label, n from (${waitingJobsByTask(sql)}) q
  union all
  select 'deliveries', status, count(*)::int from webhook_deliveries group by status
  union all
  select 'uploads', status, count(*)::int from uploads group by status
  union all
  select 'stuck', status, count(*)::int from uploads where ${stuckSql(sql, stuckSeconds, 'uploads')}
  group by status
  union all
  select 'purged', kind, purged::float8 from retention_runs
  union all
  select 'oldest', kind, extract(epoch from oldest_kept)::float8 from retention_runs
    where oldest_kept is not null`

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
    seen: new Set<string>(UPLOAD_STATES),
  },
  stuck: {
    gauge: stuckUploads as Gauge<string>,
    label: 'status',
    seen: new Set<string>(PENDING_STATES),
  },
  purged: {
    gauge: retentionPurged as Gauge<string>,
    label: 'kind',
    seen: new Set(['events', 'deliveries']),
  },
  oldest: {
    gauge: retentionOldest as Gauge<string>,
    label: 'kind',
    seen: new Set(['events', 'deliveries']),
  },
}

// The tasks of a worker process: their queue depths are reported from the start.
export const reportQueues = (tasks: string[]) => {
  for (const name of tasks) gauges.queue.seen.add(name)
}

const refreshDatabaseGauges = async (sql: Sql, stuckSeconds: number) => {
  const rows = await databaseCounts(sql, stuckSeconds)
  for (const { gauge, label, seen } of Object.values(gauges))
    for (const value of seen) gauge.set({ [label]: value }, 0)
  for (const row of rows) {
    const { gauge, label, seen } = gauges[row.gauge]
    seen.add(row.label)
    gauge.set({ [label]: row.label }, row.n)
  }
}

// The service's own backups (scheduled or started through the admin API), in the whole database.
const backupGauges = {
  last_success: new Gauge({
    name: 'service_backup_last_success_timestamp_seconds',
    help: 'When the last successful backup ended (Unix time; 0: none yet).',
    registers: [registry],
  }),
  bytes: new Gauge({
    name: 'service_backup_last_success_bytes',
    help: 'Size of the last successful backup file.',
    registers: [registry],
  }),
  failures: new Gauge({
    name: 'service_backup_failures',
    help: 'Backups that failed, ever.',
    registers: [registry],
  }),
}
// backup_runs is written by src/backups/ when a backup ends.
type BackupStatsRow = { last_success: number | null; bytes: number | null; failures: number }
const backupStats = async (sql: Sql) => {
  const [row] = await sql<BackupStatsRow[]>`
    select extract(epoch from s.finished_at)::float8 as last_success, s.bytes,
      (select count(*)::int from backup_runs where error is not null) as failures
    from (select) x
      left join lateral (select finished_at, bytes from backup_runs where error is null
                         order by finished_at desc limit 1) s on true`
  return row
}
const refreshBackupGauges = async (sql: Sql) => {
  const stats = await backupStats(sql)
  for (const key of ['last_success', 'bytes', 'failures'] as const)
    backupGauges[key].set(stats[key] ?? 0)
}

export const renderMetrics = async (sql: Sql, stuckSeconds: number) => {
  await Promise.all([refreshDatabaseGauges(sql, stuckSeconds), refreshBackupGauges(sql)])
  return { contentType: registry.contentType, text: await registry.metrics() }
}
