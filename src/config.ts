// Configuration comes from the environment only.
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
  jobLockTimeoutSeconds: number
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
  jobLockTimeoutSeconds: int(env.SERVICE_JOB_LOCK_TIMEOUT, 900),
})
