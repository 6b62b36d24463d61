import { homedir } from 'node:os'
import { join } from 'node:path'
import { parseCrontab } from 'graphile-worker'
import * as v from 'valibot'

// Configuration comes from the environment only, resolved in one step (as postgres.js's
// parseOptions): KNOBS is the one table of variables, defaults, limits and meanings,
// from which loadConfig, `service --help` and the table in docs/operations.md (checked by
// test/config.test.ts) are made.

// A knob's rule: a valibot schema of its text. A text that fails it takes the default, except for a
// knob that `refuses`: its variable is a setting an operator gave and expects in force, so the
// start stops with the rule's message.
type Rule<T> = v.GenericSchema<string, T>
interface Knob<T> {
  env: string
  fallback: T | (() => T)
  // The default as --help and the docs print it, when String(fallback) does not say it.
  shown?: string
  rule: Rule<T>
  refuses?: true
  meaning: string
}
const knob = <T>(k: Knob<T>) => k

const text = v.string()
const whole = (min: number, max = Number.MAX_SAFE_INTEGER): Rule<number> =>
  v.pipe(v.string(), v.transform(Number), v.integer(), v.minValue(min), v.maxValue(max))
const positive = whole(1)
const cronError = (t: string) => {
  try {
    parseCrontab(`${t} backup_database`)
  } catch (err) {
    return (err as Error).message
  }
}
// A schedule is refused at start rather than ignored: an operator who set one expects it to run.
const cronExpression = (env: string): Rule<string> =>
  v.pipe(
    v.string(),
    v.rawCheck(({ dataset, addIssue }) => {
      const error = dataset.typed && cronError(dataset.value)
      if (error)
        addIssue({ message: `${env} '${dataset.value}' is not a cron expression: ${error}` })
    }),
  )
// Startup parameters as `name=value` pairs apart by spaces.
const PARAMETER = /^([A-Za-z_][\w.]*)=(\S+)$/
const parameters: Rule<Record<string, string>> = v.pipe(
  v.string(),
  v.transform((t) => t.trim().split(/\s+/)),
  v.array(
    v.pipe(
      v.string(),
      v.regex(PARAMETER, (i) => `SERVICE_DATABASE_API_OPTIONS: '${i.input}' is not name=value.`),
    ),
  ),
  v.transform((pairs) =>
    Object.fromEntries(pairs.map((pair) => PARAMETER.exec(pair)!.slice(1, 3))),
  ),
)
// An origin and an optional path, without a trailing slash: invite links and the sessions' Origin
// check are made from it.
const publicUrl: Rule<string> = v.pipe(
  v.string(),
  v.check(
    (t) =>
      URL.canParse(t) &&
      /^https?:$/.test(new URL(t).protocol) &&
      !new URL(t).search &&
      !new URL(t).hash,
    (i) => `SERVICE_PUBLIC_URL '${i.input}' is not an http(s) address without query or fragment.`,
  ),
  v.transform((t) => new URL(t).href.replace(/\/$/, '')),
)
const LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const

const KNOBS = {
  databaseUrl: knob<string | undefined>({
    env: 'DATABASE_URL',
    fallback: undefined,
    shown: 'embedded',
    rule: text,
    meaning: 'PostgreSQL to use; without it an embedded server keeps its data in SERVICE_DATA_DIR',
  }),
  dataDir: knob({
    env: 'SERVICE_DATA_DIR',
    fallback: '.data/pg',
    rule: text,
    meaning: "the embedded server's data folder",
  }),
  embeddedPort: knob({
    env: 'EMBEDDED_PG_PORT',
    fallback: 54329,
    rule: whole(1, 65535),
    meaning: "the embedded server's port (127.0.0.1 only)",
  }),
  cacheDir: knob({
    env: 'SERVICE_CACHE_DIR',
    // As root a system folder the postgres user can read (it runs the binaries), otherwise
    // the user's cache.
    fallback: () =>
      process.getuid?.() === 0
        ? '/var/cache/customer-data-service'
        : join(homedir(), '.cache', 'customer-data-service'),
    shown: '~/.cache/customer-data-service (as root /var/cache/customer-data-service)',
    rule: text,
    meaning:
      'where the embedded PostgreSQL binaries are unpacked: a folder only this user (or root) can write',
  }),
  port: knob({
    env: 'PORT',
    fallback: 8080,
    rule: whole(0, 65535),
    meaning: 'HTTP port (0: any free port)',
  }),
  host: knob({ env: 'HOST', fallback: '0.0.0.0', rule: text, meaning: 'HTTP address' }),
  adminToken: knob<string | undefined>({
    env: 'SERVICE_ADMIN_TOKEN',
    fallback: undefined,
    shown: 'unset (admin API off)',
    rule: text,
    meaning: 'bearer token of the admin API',
  }),
  publicUrl: knob<string | undefined>({
    env: 'SERVICE_PUBLIC_URL',
    fallback: undefined,
    shown: "unset (the request's Host)",
    rule: publicUrl,
    refuses: true,
    meaning:
      'the address people open (https://...): the origin sessions accept, and the base of invite links',
  }),
  secretKey: knob<string | undefined>({
    env: 'SERVICE_SECRET_KEY',
    fallback: undefined,
    shown: 'unset (no SSO)',
    rule: v.pipe(
      v.string(),
      v.minLength(
        32,
        'SERVICE_SECRET_KEY must be at least 32 characters (openssl rand -base64 32).',
      ),
    ),
    refuses: true,
    meaning:
      'seals the secrets the service keeps (SSO client secrets) in the database: 32 characters or more',
  }),
  workerConcurrency: knob({
    env: 'WORKER_CONCURRENCY',
    fallback: 10,
    rule: positive,
    meaning: 'jobs a worker runs at once',
  }),
  logLevel: knob<(typeof LEVELS)[number]>({
    env: 'LOG_LEVEL',
    fallback: 'info',
    rule: v.pipe(v.string(), v.picklist(LEVELS)),
    meaning:
      'debug, info, warn, error or silent; JSON lines on stderr, one per request and one per job',
  }),
  webhookAllowPrivate: knob({
    env: 'SERVICE_WEBHOOK_ALLOW_PRIVATE',
    fallback: false,
    shown: '0',
    rule: v.pipe(
      v.string(),
      v.transform((t) => t === '1'),
    ),
    meaning: '1 allows http and private addresses for webhooks (local use and tests)',
  }),
  trackRateLimit: knob({
    env: 'SERVICE_TRACK_RATE_LIMIT',
    fallback: 200,
    rule: positive,
    meaning: 'tracking requests per minute per key',
  }),
  apiRateLimit: knob({
    env: 'SERVICE_API_RATE_LIMIT',
    fallback: 500,
    rule: positive,
    meaning: 'other API requests per minute per key',
  }),
  maxPendingUploads: knob({
    env: 'SERVICE_MAX_PENDING_UPLOADS',
    fallback: 50,
    rule: positive,
    meaning: 'unprocessed uploads per account before uploads answer 429',
  }),
  webhookRetryScale: knob({
    env: 'SERVICE_WEBHOOK_RETRY_SCALE',
    fallback: 1,
    rule: v.pipe(v.string(), v.transform(Number), v.gtValue(0)),
    meaning: 'multiplies the webhook retry delays (5 s, 25 s); tests only',
  }),
  webhookSecretGraceSeconds: knob({
    env: 'SERVICE_WEBHOOK_SECRET_GRACE_SECONDS',
    fallback: 86_400,
    rule: positive,
    meaning: 'after rotate-secret, deliveries are also signed with the old secret for this long',
  }),
  webhookDisableAfterSeconds: knob({
    env: 'SERVICE_WEBHOOK_DISABLE_AFTER_SECONDS',
    fallback: 432_000,
    rule: positive,
    meaning: 'a webhook whose every attempt has failed for this long is disabled (5 days)',
  }),
  jobLockTimeoutSeconds: knob({
    env: 'SERVICE_JOB_LOCK_TIMEOUT',
    fallback: 900,
    rule: positive,
    meaning: 'seconds after which a job lock held by a live worker is released',
  }),
  headersTimeoutMs: knob({
    env: 'SERVICE_HEADERS_TIMEOUT_MS',
    fallback: 10_000,
    rule: positive,
    meaning: 'time a client has to send its request headers',
  }),
  requestTimeoutMs: knob({
    env: 'SERVICE_REQUEST_TIMEOUT_MS',
    fallback: 60_000,
    rule: positive,
    meaning: 'time a client has to send its whole request',
  }),
  bodyIdleTimeoutMs: knob({
    env: 'SERVICE_BODY_IDLE_TIMEOUT_MS',
    fallback: 10_000,
    rule: positive,
    meaning: 'longest pause within a request body before a 408',
  }),
  keepAliveTimeoutMs: knob({
    env: 'SERVICE_KEEP_ALIVE_TIMEOUT_MS',
    fallback: 65_000,
    rule: positive,
    meaning: "idle time of a kept-alive connection (keep it above a load balancer's)",
  }),
  maxConnections: knob({
    env: 'SERVICE_MAX_CONNECTIONS',
    fallback: 1000,
    rule: positive,
    meaning: 'connections held at once; more are refused',
  }),
  searchTimeoutMs: knob({
    env: 'SERVICE_SEARCH_TIMEOUT_MS',
    fallback: 5000,
    rule: positive,
    meaning: "a search's statement timeout (customers, contacts, a segment's members)",
  }),
  aggregateTimeoutMs: knob({
    env: 'SERVICE_AGGREGATE_TIMEOUT_MS',
    fallback: 10_000,
    rule: positive,
    meaning: "an aggregate's statement timeout",
  }),
  segmentTimeoutMs: knob({
    env: 'SERVICE_SEGMENT_TIMEOUT_MS',
    fallback: 60_000,
    rule: positive,
    meaning: "the statement timeout of a segment's recomputation (worker)",
  }),
  heavyPoolSize: knob({
    env: 'SERVICE_HEAVY_POOL_SIZE',
    fallback: 8,
    rule: positive,
    meaning: 'database connections for searches and aggregates, beside 20 for the rest',
  }),
  databaseApiOptions: knob<Record<string, string>>({
    env: 'SERVICE_DATABASE_API_OPTIONS',
    fallback: {},
    shown: 'unset',
    rule: parameters,
    refuses: true,
    meaning:
      'settings of the sessions that serve service-key requests (service-api), as name=value pairs apart by ' +
      'spaces, such as `citus.multi_task_query_log_level=error`',
  }),
  maxConnectionsPerAddress: knob({
    env: 'SERVICE_MAX_CONNECTIONS_PER_ADDRESS',
    fallback: 100,
    rule: whole(0),
    meaning:
      'connections one client address holds at once; more are refused (0: no per-address cap, behind a proxy)',
  }),
  expensivePerAccount: knob({
    env: 'SERVICE_EXPENSIVE_PER_ACCOUNT',
    fallback: 1,
    rule: positive,
    meaning:
      'searches, aggregates and segment searches an account runs at once in one process; more wait or answer 429',
  }),
  expensiveWaiting: knob({
    env: 'SERVICE_EXPENSIVE_WAITING',
    fallback: 4,
    rule: whole(0),
    meaning:
      "an account's expensive requests that wait for a place in one process; more answer 429 at once (0: none wait)",
  }),
  expensiveWaitMs: knob({
    env: 'SERVICE_EXPENSIVE_WAIT_MS',
    fallback: 1000,
    rule: positive,
    meaning: 'how long such a request waits for a place before it answers 429',
  }),
  eventRetentionDays: knob({
    env: 'SERVICE_EVENT_RETENTION_DAYS',
    fallback: 400,
    rule: positive,
    meaning:
      'tracked events are deleted this many days after they were received (daily; scoring reads 30 days)',
  }),
  deliveryRetentionDays: knob({
    env: 'SERVICE_DELIVERY_RETENTION_DAYS',
    fallback: 30,
    rule: positive,
    meaning:
      "webhook deliveries lose their payload and the receiver's answer after this many days (daily)",
  }),
  auditRetentionDays: knob({
    env: 'SERVICE_AUDIT_RETENTION_DAYS',
    fallback: 400,
    rule: positive,
    meaning: 'audit log entries are deleted this many days after the change they record (daily)',
  }),
  stuckUploadSeconds: knob({
    env: 'SERVICE_STUCK_UPLOAD_SECONDS',
    fallback: 900,
    rule: positive,
    meaning: 'an upload received or processing for longer counts as stuck (/metrics, admin)',
  }),
  backupDir: knob({
    env: 'SERVICE_BACKUP_DIR',
    fallback: '.data/backups',
    rule: text,
    meaning:
      'where scheduled backups and those started from the admin API are written (service backup --to DIR)',
  }),
  backupSchedule: knob<string | undefined>({
    env: 'SERVICE_BACKUP_SCHEDULE',
    fallback: undefined,
    shown: 'unset (no scheduled backups)',
    rule: cronExpression('SERVICE_BACKUP_SCHEDULE'),
    refuses: true,
    meaning:
      'when the worker makes a backup: a cron expression in UTC, such as `0 3 * * *` (daily at 03:00)',
  }),
  churnModelLeadDays: knob({
    env: 'SERVICE_CHURN_MODEL_LEAD_DAYS',
    fallback: 30,
    rule: whole(0, 3650),
    meaning:
      "days before a churn from which a churned customer's metric snapshots are not learned from",
  }),
  churnModelRetrain: knob<string | undefined>({
    env: 'SERVICE_CHURN_MODEL_RETRAIN',
    fallback: undefined,
    shown: 'unset (a model trains only when asked)',
    rule: cronExpression('SERVICE_CHURN_MODEL_RETRAIN'),
    refuses: true,
    meaning: 'when every account with a churn model trains it again: a cron expression in UTC',
  }),
  backupKeep: knob({
    env: 'SERVICE_BACKUP_KEEP',
    fallback: 7,
    rule: positive,
    meaning:
      'backups kept in SERVICE_BACKUP_DIR after each one the service makes; older ones are removed',
  }),
  backupKey: knob<string | undefined>({
    env: 'SERVICE_BACKUP_KEY',
    fallback: undefined,
    shown: 'unset (backups not encrypted)',
    rule: text,
    meaning:
      'a passphrase: backups are encrypted and authenticated with it (age), and restore needs it',
  }),
}

export type Config = {
  [K in keyof typeof KNOBS]: (typeof KNOBS)[K] extends Knob<infer T> ? T : never
}

// An unset or empty variable, or one that is not a valid value, takes the default (or
// stops the start).
const resolve = <T>({ env: name, fallback, rule, refuses }: Knob<T>, env: NodeJS.ProcessEnv): T => {
  const given = env[name] ? v.safeParse(rule, env[name]) : undefined
  if (given?.success) return given.output
  if (given && refuses) throw new Error(given.issues[0].message)
  return typeof fallback === 'function' ? (fallback as () => T)() : fallback
}

export const loadConfig = (env: NodeJS.ProcessEnv = process.env): Config =>
  Object.fromEntries(
    Object.entries(KNOBS).map(([key, k]) => [key, resolve(k as Knob<unknown>, env)]),
  ) as Config

// Every variable with its default as printed and its meaning, in the table's order.
export const ENVIRONMENT = Object.values(KNOBS).map((k: Knob<unknown>) => ({
  name: k.env,
  shown: k.shown ?? String(k.fallback),
  meaning: k.meaning,
}))

export const environmentHelp = () => {
  const width = Math.max(...ENVIRONMENT.map(({ name }) => name.length))
  return ENVIRONMENT.map(
    ({ name, shown, meaning }) => `  ${name.padEnd(width)}  ${meaning} (default: ${shown})`,
  ).join('\n')
}

// The table of docs/operations.md's Configuration section.
export const environmentTable = () =>
  [
    '| variable | default | meaning |',
    '|---|---|---|',
    ...ENVIRONMENT.map(({ name, shown, meaning }) => `| \`${name}\` | ${shown} | ${meaning} |`),
  ].join('\n')
