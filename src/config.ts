// Configuration comes from the environment only. ENVIRONMENT lists every variable the service
// reads, with its default: `service --help` prints it and docs/operations.md repeats it
// (test/config.test.ts keeps the list complete).
export const ENVIRONMENT: [name: string, fallback: string, meaning: string][] = [
  ['DATABASE_URL', 'embedded', 'PostgreSQL to use; without it an embedded server keeps its data in SERVICE_DATA_DIR'],
  ['SERVICE_DATA_DIR', '.data/pg', "the embedded server's data folder"],
  ['EMBEDDED_PG_PORT', '54329', "the embedded server's port (127.0.0.1 only)"],
  [
    'SERVICE_CACHE_DIR',
    '~/.cache/customer-data-service (as root /var/cache/customer-data-service)',
    'where the embedded PostgreSQL binaries are unpacked: a folder only this user (or root) can write',
  ],
  ['PORT', '8080', 'HTTP port'],
  ['HOST', '0.0.0.0', 'HTTP address'],
  ['SERVICE_ADMIN_TOKEN', 'unset (admin API off)', 'bearer token of the admin API'],
  ['WORKER_CONCURRENCY', '10', 'jobs a worker runs at once'],
  ['LOG_LEVEL', 'info', 'debug, info, warn, error or silent'],
  ['SERVICE_WEBHOOK_ALLOW_PRIVATE', '0', '1 allows http and private addresses for webhooks (local use and tests)'],
  ['SERVICE_TRACK_RATE_LIMIT', '200', 'tracking requests per minute per key'],
  ['SERVICE_API_RATE_LIMIT', '500', 'other API requests per minute per key'],
  ['SERVICE_MAX_PENDING_UPLOADS', '50', 'unprocessed uploads per account before uploads answer 429'],
  ['SERVICE_WEBHOOK_RETRY_SCALE', '1', 'multiplies the webhook retry delays (5 s, 25 s); tests only'],
  [
    'SERVICE_WEBHOOK_SECRET_GRACE_SECONDS',
    '86400',
    'after rotate-secret, deliveries are also signed with the old secret for this long',
  ],
  [
    'SERVICE_WEBHOOK_DISABLE_AFTER_SECONDS',
    '432000',
    'a webhook whose every attempt has failed for this long is disabled (5 days)',
  ],
  ['SERVICE_JOB_LOCK_TIMEOUT', '900', 'seconds after which a job lock held by a live worker is released'],
  ['SERVICE_HEADERS_TIMEOUT_MS', '10000', 'time a client has to send its request headers'],
  ['SERVICE_REQUEST_TIMEOUT_MS', '60000', 'time a client has to send its whole request'],
  ['SERVICE_BODY_IDLE_TIMEOUT_MS', '10000', 'longest pause within a request body before a 408'],
  ['SERVICE_KEEP_ALIVE_TIMEOUT_MS', '65000', "idle time of a kept-alive connection (keep it above a load balancer's)"],
  ['SERVICE_MAX_CONNECTIONS', '1000', 'connections held at once; more are refused'],
  ['SERVICE_SEARCH_TIMEOUT_MS', '5000', "a search's statement timeout (customers, contacts, a segment's members)"],
  ['SERVICE_AGGREGATE_TIMEOUT_MS', '10000', "an aggregate's statement timeout"],
  ['SERVICE_SEGMENT_TIMEOUT_MS', '60000', "the statement timeout of a segment's recomputation (worker)"],
  ['SERVICE_HEAVY_POOL_SIZE', '8', 'database connections for searches and aggregates, beside 20 for the rest'],
  [
    'SERVICE_MAX_CONNECTIONS_PER_ADDRESS',
    '100',
    'connections one client address holds at once; more are refused (0: no per-address cap, behind a proxy)',
  ],
  [
    'SERVICE_EXPENSIVE_PER_ACCOUNT',
    '1',
    'searches, aggregates and segment searches an account runs at once in one process; more wait or answer 429',
  ],
  [
    'SERVICE_EXPENSIVE_WAITING',
    '4',
    "an account's expensive requests that wait for a place in one process; more answer 429 at once",
  ],
  ['SERVICE_EXPENSIVE_WAIT_MS', '1000', 'how long such a request waits for a place before it answers 429'],
  [
    'SERVICE_STUCK_UPLOAD_SECONDS',
    '900',
    'an upload received or processing for longer counts as stuck (/metrics, admin)',
  ],
]

export const environmentHelp = () => {
  const width = Math.max(...ENVIRONMENT.map(([name]) => name.length))
  return ENVIRONMENT.map(
    ([name, fallback, meaning]) => `  ${name.padEnd(width)}  ${meaning} (default: ${fallback})`,
  ).join('\n')
}

export interface Config {
  databaseUrl?: string
  port: number
  host: string
  adminToken?: string
  workerConcurrency: number
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent'
  webhookAllowPrivate: boolean
  trackRateLimit: number
  apiRateLimit: number
  maxPendingUploads: number
  // Multiplies the webhook retry delays (5 s, 25 s); only tests set it below 1.
  webhookRetryScale: number
  webhookSecretGraceSeconds: number
  webhookDisableAfterSeconds: number
  jobLockTimeoutSeconds: number
  stuckUploadSeconds: number
  headersTimeoutMs: number
  requestTimeoutMs: number
  bodyIdleTimeoutMs: number
  keepAliveTimeoutMs: number
  maxConnections: number
  searchTimeoutMs: number
  aggregateTimeoutMs: number
  segmentTimeoutMs: number
  heavyPoolSize: number
  maxConnectionsPerAddress: number
  expensivePerAccount: number
  expensiveWaiting: number
  expensiveWaitMs: number
}

const int = (value: string | undefined, fallback: number) => {
  const n = Number(value)
  return value && Number.isInteger(n) && n > 0 ? n : fallback
}

export const loadConfig = (env: NodeJS.ProcessEnv = process.env): Config => ({
  databaseUrl: env.DATABASE_URL || undefined,
  port: env.PORT === undefined ? 8080 : Number(env.PORT),
  host: env.HOST || '0.0.0.0',
  adminToken: env.SERVICE_ADMIN_TOKEN || undefined,
  workerConcurrency: int(env.WORKER_CONCURRENCY, 10),
  logLevel: (env.LOG_LEVEL as Config['logLevel']) || 'info',
  webhookAllowPrivate: env.SERVICE_WEBHOOK_ALLOW_PRIVATE === '1',
  trackRateLimit: int(env.SERVICE_TRACK_RATE_LIMIT, 200),
  apiRateLimit: int(env.SERVICE_API_RATE_LIMIT, 500),
  maxPendingUploads: int(env.SERVICE_MAX_PENDING_UPLOADS, 50),
  webhookRetryScale: Number(env.SERVICE_WEBHOOK_RETRY_SCALE) > 0 ? Number(env.SERVICE_WEBHOOK_RETRY_SCALE) : 1,
  webhookSecretGraceSeconds: int(env.SERVICE_WEBHOOK_SECRET_GRACE_SECONDS, 86_400),
  webhookDisableAfterSeconds: int(env.SERVICE_WEBHOOK_DISABLE_AFTER_SECONDS, 432_000),
  jobLockTimeoutSeconds: int(env.SERVICE_JOB_LOCK_TIMEOUT, 900),
  stuckUploadSeconds: int(env.SERVICE_STUCK_UPLOAD_SECONDS, 900),
  headersTimeoutMs: int(env.SERVICE_HEADERS_TIMEOUT_MS, 10_000),
  requestTimeoutMs: int(env.SERVICE_REQUEST_TIMEOUT_MS, 60_000),
  bodyIdleTimeoutMs: int(env.SERVICE_BODY_IDLE_TIMEOUT_MS, 10_000),
  keepAliveTimeoutMs: int(env.SERVICE_KEEP_ALIVE_TIMEOUT_MS, 65_000),
  maxConnections: int(env.SERVICE_MAX_CONNECTIONS, 1000),
  searchTimeoutMs: int(env.SERVICE_SEARCH_TIMEOUT_MS, 5000),
  aggregateTimeoutMs: int(env.SERVICE_AGGREGATE_TIMEOUT_MS, 10_000),
  segmentTimeoutMs: int(env.SERVICE_SEGMENT_TIMEOUT_MS, 60_000),
  heavyPoolSize: int(env.SERVICE_HEAVY_POOL_SIZE, 8),
  maxConnectionsPerAddress:
    env.SERVICE_MAX_CONNECTIONS_PER_ADDRESS === '0' ? 0 : int(env.SERVICE_MAX_CONNECTIONS_PER_ADDRESS, 100),
  expensivePerAccount: int(env.SERVICE_EXPENSIVE_PER_ACCOUNT, 1),
  expensiveWaiting: env.SERVICE_EXPENSIVE_WAITING === '0' ? 0 : int(env.SERVICE_EXPENSIVE_WAITING, 4),
  expensiveWaitMs: int(env.SERVICE_EXPENSIVE_WAIT_MS, 1000),
})
