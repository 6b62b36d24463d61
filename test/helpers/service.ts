import { loadConfig, type Config } from '../../src/config.ts'
import { startService } from '../../src/service.ts'
import { freshDatabase } from './db.ts'

export const ADMIN_TOKEN = 'test-admin-token'
// Seals the SSO client secrets (SERVICE_SECRET_KEY): 32 characters or more.
export const SECRET_KEY = 'test-secret-key-of-32-characters-or-more'

export interface Call {
  status: number
  headers: Headers
  body: any
}

// The whole service (HTTP on a loopback port plus the worker) on its own fresh database.
export const startTestService = async (
  overrides: Partial<Config> = {},
  parts = { http: true, worker: true },
) => {
  const db = await freshDatabase()
  // The environment's settings of the api sessions only (the Citus pass makes them fail a fan-out).
  const apiOptions = { SERVICE_DATABASE_API_OPTIONS: process.env.SERVICE_DATABASE_API_OPTIONS }
  const config: Config = {
    ...loadConfig(apiOptions),
    port: 0,
    host: '127.0.0.1',
    adminToken: ADMIN_TOKEN,
    logLevel: 'silent',
    webhookAllowPrivate: true,
    secretKey: SECRET_KEY,
    ...overrides,
  }
  const service = await startService(config, db.url, parts)
  const base = `http://127.0.0.1:${service.port}`

  const call = async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Call> => {
    // A redirect is an answer of its own (the SSO callback's), not a page to follow.
    const res = await fetch(base + path, {
      method,
      redirect: 'manual',
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, headers: res.headers, body: parsed }
  }
  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `/admin/v1${path}`, body, { authorization: `Bearer ${ADMIN_TOKEN}` })
  const api =
    (token: string) =>
    (path: string, body?: unknown, method = 'POST') =>
      call(method, path, body, { 'service-key': token })

  // An account with a key of every scope.
  const account = async (name = 'Acme', extra: Record<string, unknown> = {}) => {
    const created = await admin('POST', '/accounts', { name, ...extra })
    if (created.status !== 201) throw new Error(`account: ${JSON.stringify(created.body)}`)
    const key = await admin('POST', `/accounts/${created.body.id}/keys`, {})
    return {
      id: created.body.id as number,
      trackerKey: created.body.tracker_key as string,
      token: key.body.token as string,
      api: api(key.body.token),
    }
  }

  return {
    base,
    url: db.url,
    sql: service.app.sql,
    app: service.app,
    call,
    admin,
    api,
    account,
    stop: async () => {
      await service.stop()
      await db.drop()
    },
  }
}

export type TestService = Awaited<ReturnType<typeof startTestService>>
