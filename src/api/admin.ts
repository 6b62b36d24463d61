import * as v from 'valibot'
import { Refusal } from '../errors.ts'
import { refusalReply } from '../http/problem.ts'
import { idParam } from '../route.ts'
import { invoke } from '../http/router.ts'
import { accountIn } from '../accounts/accounts.ts'
import { listEvents } from '../admin/events.ts'
import { listNotifications } from '../admin/notifications.ts'
import { cancelUpload, listUploads, retryUpload } from '../admin/uploads.ts'
import type { App } from '../context.ts'
import type { Handler, QueryOf, Reply, Req, Route } from '../route.ts'
import {
  EventQuery,
  Events,
  Notification,
  NotificationQuery,
  UploadAction,
  UploadQuery,
  UploadSummary,
} from './schemas.ts'

const ok = (body: unknown, status = 200): Reply => ({ status, body })
const created = (body: unknown) => ok(body, 201)
const noContent: Reply = { status: 204 }

type Op = Omit<Route, 'auth' | 'tag'>
const A = '/admin/v1/accounts'
const inAccount =
  (fn: (id: number, req: Req, app: App) => Promise<Reply>): Handler =>
  async (req, app) =>
    fn(await accountIn(req, app), req, app)

const ops: Op[] = [
  {
    name: 'list-notifications',
    reply: { status: 200, body: v.array(Notification) },
    query: NotificationQuery,
    method: 'GET',
    path: `${A}/:id/notifications`,
    summary: 'List notifications (?user_email=)',
    handler: inAccount(async (id, req, app) =>
      ok(await listNotifications(app.sql, id, (req.queryInput as QueryOf<typeof NotificationQuery>).user_email)),
    ),
  },
  {
    name: 'list-uploads',
    reply: { status: 200, body: v.array(UploadSummary) },
    query: UploadQuery,
    method: 'GET',
    path: `${A}/:id/uploads`,
    summary: "List an account's uploads, newest first (?status=, ?stuck=true)",
    handler: inAccount(async (id, req, app) =>
      ok(await listUploads(app.sql, id, req.queryInput as QueryOf<typeof UploadQuery>, app.config.stuckUploadSeconds)),
    ),
  },
  {
    name: 'retry-upload',
    reply: { status: 202, body: UploadAction },
    method: 'POST',
    path: `${A}/:id/uploads/:upload_id/retry`,
    summary: 'Process a failed or stuck upload again',
    refusals: [409],
    handler: inAccount(async (id, req, app) =>
      ok(await retryUpload(app.sql, id, idParam(req, 'upload_id'), app.config.stuckUploadSeconds), 202),
    ),
  },
  {
    name: 'cancel-upload',
    reply: { status: 200, body: UploadAction },
    method: 'POST',
    path: `${A}/:id/uploads/:upload_id/cancel`,
    summary: 'Fail an upload that is not processed yet (it can be retried later)',
    refusals: [409],
    handler: inAccount(async (id, req, app) =>
      ok(await cancelUpload(app.sql, id, idParam(req, 'upload_id'), app.config.stuckUploadSeconds)),
    ),
  },
  {
    name: 'list-events',
    reply: { status: 200, body: Events },
    query: EventQuery,
    method: 'GET',
    path: `${A}/:id/events`,
    summary: 'Count and list recent tracking events (?customer=&limit=, newest first)',
    handler: inAccount(async (id, req, app) => {
      const { customer, limit } = req.queryInput as QueryOf<typeof EventQuery>
      return ok(await listEvents(app.sql, id, customer, limit))
    }),
  },
]

export const adminRoutes: Route[] = ops.map((op) => ({ ...op, auth: 'admin', tag: 'admin' }))

// An admin operation run directly (the CLI): the same validation and handler as over HTTP, with
// path parameters and query parameters from flags and the JSON body as text.
export const invokeAdmin = async (route: Route, params: Record<string, string>, body: string, app: App) => {
  const req: Req = {
    id: 'cli',
    method: route.method,
    url: 'http://cli/',
    headers: {},
    body: Buffer.from(body),
    params,
    query: { ...params },
  }
  try {
    return { ok: true, body: (await invoke(route, req, app)).body }
  } catch (err) {
    if (!(err instanceof Refusal)) throw err
    return { ok: false, body: refusalReply(err).body }
  }
}
