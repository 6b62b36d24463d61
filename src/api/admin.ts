import * as v from 'valibot'
import { Refusal, refuse } from '../errors.ts'
import { refusalReply } from '../http/problem.ts'
import { idParam, textParam } from '../route.ts'
import { invoke } from '../http/router.ts'
import {
  createAccount,
  CreateAccountBody,
  accountIn,
  getAccount,
  listAccounts,
  setTrackingDomains,
  TrackingBody,
  updateAccount,
  UpdateAccountBody,
} from '../accounts/accounts.ts'
import { CreateKeyBody, createKey, listKeys, revokeKey } from '../accounts/keys.ts'
import {
  addUser,
  createTag,
  defineProperty,
  deleteProperty,
  listProperties,
  listTags,
  listUsers,
  PropertyBody,
  TagBody,
  UserBody,
} from '../admin/properties.ts'
import { listEvents } from '../admin/events.ts'
import { listNotifications } from '../admin/notifications.ts'
import { cancelUpload, listUploads, retryUpload } from '../admin/uploads.ts'
import { setRecordTags, TagTitlesBody } from '../admin/tagging.ts'
import { segmentsNaming } from '../segments/segments.ts'
import type { Entity } from '../catalog.ts'
import type { App } from '../context.ts'
import type { Tx } from '../db/client.ts'
import type { Handler, QueryOf, Reply, Req, Route } from '../route.ts'
import {
  Account,
  EventQuery,
  Events,
  Key,
  NewKey,
  Notification,
  NotificationQuery,
  Property,
  Tag,
  TagTitles,
  UploadAction,
  UploadQuery,
  UploadSummary,
  User,
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
    name: 'create-account',
    reply: { status: 201, body: Account },
    method: 'POST',
    path: A,
    summary: 'Create an account',
    body: CreateAccountBody,
    handler: async (req, app) => created(await createAccount(app.sql, req.input as never)),
  },
  {
    name: 'list-accounts',
    reply: { status: 200, body: v.array(Account) },
    method: 'GET',
    path: A,
    summary: 'List the accounts, oldest first',
    handler: async (_req, app) => ok(await listAccounts(app.sql)),
  },
  {
    name: 'get-account',
    reply: { status: 200, body: Account },
    method: 'GET',
    path: `${A}/:id`,
    summary: 'Read an account',
    handler: async (req, app) => ok(await getAccount(app.sql, idParam(req, 'id'))),
  },
  {
    name: 'update-account',
    reply: { status: 200, body: Account },
    method: 'PATCH',
    path: `${A}/:id`,
    summary: 'Rename an account or change its source of truth',
    body: UpdateAccountBody,
    handler: async (req, app) => ok(await updateAccount(app.sql, idParam(req, 'id'), req.input as never)),
  },
  {
    name: 'create-key',
    reply: { status: 201, body: NewKey },
    method: 'POST',
    path: `${A}/:id/keys`,
    summary: 'Create an API key (the token is shown only here)',
    body: CreateKeyBody,
    handler: inAccount(async (id, req, app) => created(await createKey(app.sql, id, req.input as never))),
  },
  {
    name: 'list-keys',
    reply: { status: 200, body: v.array(Key) },
    method: 'GET',
    path: `${A}/:id/keys`,
    summary: 'List API keys',
    handler: inAccount(async (id, _req, app) => ok(await listKeys(app.sql, id))),
  },
  {
    name: 'revoke-key',
    reply: { status: 204 },
    method: 'DELETE',
    path: `${A}/:id/keys/:key_id`,
    summary: 'Revoke an API key',
    handler: inAccount(
      async (id, req, app) => (await revokeKey(app.sql, id, idParam(req, 'key_id')), app.keys.forget(), noContent),
    ),
  },
  {
    name: 'add-user',
    reply: { status: 201, body: User },
    method: 'POST',
    path: `${A}/:id/users`,
    summary: 'Add a user',
    body: UserBody,
    refusals: [409],
    handler: inAccount(async (id, req, app) => created(await addUser(app.sql, id, req.input as never))),
  },
  {
    name: 'list-users',
    reply: { status: 200, body: v.array(User) },
    method: 'GET',
    path: `${A}/:id/users`,
    summary: 'List users',
    handler: inAccount(async (id, _req, app) => ok(await listUsers(app.sql, id))),
  },
  {
    name: 'define-property',
    reply: { status: 201, body: Property },
    method: 'POST',
    path: `${A}/:id/properties`,
    summary: 'Define a property',
    body: PropertyBody,
    refusals: [409],
    handler: inAccount(async (id, req, app) => created(await defineProperty(app.sql, id, req.input as never))),
  },
  {
    name: 'list-properties',
    reply: { status: 200, body: v.array(Property) },
    method: 'GET',
    path: `${A}/:id/properties`,
    summary: 'List property definitions',
    handler: inAccount(async (id, _req, app) => ok(await listProperties(app.sql, id))),
  },
  {
    name: 'delete-property',
    reply: { status: 204 },
    method: 'DELETE',
    path: `${A}/:id/properties/:entity/:codename`,
    summary: 'Delete a property and its values (refused while the scoring model or a segment uses it)',
    refusals: [409],
    handler: inAccount(async (id, req, app) => {
      const entity = req.params.entity
      if (entity !== 'customer' && entity !== 'contact') refuse(404, 'No such entity: customer or contact.')
      const codename = textParam(req, 'codename')
      // Segments search customers only.
      const usedBy = (tx: Tx) => (entity === 'customer' ? segmentsNaming(tx, id, codename) : Promise.resolve([]))
      await deleteProperty(app.sql, id, entity as Entity, codename, usedBy)
      return noContent
    }),
  },
  {
    name: 'create-tag',
    reply: { status: 201, body: Tag },
    method: 'POST',
    path: `${A}/:id/tags`,
    summary: 'Create a tag',
    body: TagBody,
    refusals: [409],
    handler: inAccount(async (id, req, app) => created(await createTag(app.sql, id, req.input as never))),
  },
  {
    name: 'list-tags',
    reply: { status: 200, body: v.array(Tag) },
    method: 'GET',
    path: `${A}/:id/tags`,
    summary: 'List tags',
    handler: inAccount(async (id, _req, app) => ok(await listTags(app.sql, id))),
  },
  {
    name: 'set-customer-tags',
    reply: { status: 200, body: TagTitles },
    method: 'PUT',
    path: `${A}/:id/customers/:external_id/tags`,
    summary: "Replace a customer's tags (by title)",
    body: TagTitlesBody,
    handler: inAccount(async (id, req, app) =>
      ok(
        await setRecordTags(
          app.sql,
          id,
          'customer',
          textParam(req, 'external_id'),
          (req.input as { titles: string[] }).titles,
        ),
      ),
    ),
  },
  {
    name: 'set-contact-tags',
    reply: { status: 200, body: TagTitles },
    method: 'PUT',
    path: `${A}/:id/contacts/:external_id/tags`,
    summary: "Replace a contact's tags (by title)",
    body: TagTitlesBody,
    handler: inAccount(async (id, req, app) =>
      ok(
        await setRecordTags(
          app.sql,
          id,
          'contact',
          textParam(req, 'external_id'),
          (req.input as { titles: string[] }).titles,
        ),
      ),
    ),
  },
  {
    name: 'set-tracking',
    reply: { status: 200, body: Account },
    method: 'PUT',
    path: `${A}/:id/tracking`,
    summary: 'Set the tracking domains',
    body: TrackingBody,
    handler: inAccount(async (id, req, app) =>
      ok(await setTrackingDomains(app.sql, id, (req.input as { domains: string[] }).domains)),
    ),
  },
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
