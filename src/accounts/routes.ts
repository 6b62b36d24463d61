import * as v from 'valibot'
import { idParam, noContent, ok, type Route, route } from '../route.ts'
import {
  Account,
  KeyAccount,
  ACCOUNTS,
  accountIn,
  CreateAccountBody,
  createAccount,
  getAccount,
  listAccounts,
  setTrackingDomains,
  TrackingBody,
  UpdateAccountBody,
  updateAccount,
} from './accounts.ts'
import { CreateKeyBody, createKey, Key, listKeys, NewKey, revokeKey } from './keys.ts'

export const accountRoutes: Route[] = [
  route({
    method: 'POST',
    path: ACCOUNTS,
    auth: 'admin',
    name: 'create-account',
    summary: 'Create an account',
    body: CreateAccountBody,
    reply: { status: 201, body: Account },
    handler: async (req, app) => ok(await createAccount(app.sql, req.input), 201),
  }),
  route({
    method: 'GET',
    path: ACCOUNTS,
    auth: 'admin',
    name: 'list-accounts',
    summary: 'List the accounts, oldest first',
    reply: { status: 200, body: v.array(Account) },
    handler: async (_req, app) => ok(await listAccounts(app.sql)),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNTS}/:id`,
    auth: 'admin',
    name: 'get-account',
    summary: 'Read an account',
    reply: { status: 200, body: Account },
    handler: async (req, app) => ok(await getAccount(app.sql, idParam(req, 'id'))),
  }),
  route({
    method: 'GET',
    path: '/api/v1/account',
    auth: { key: 'search' },
    tag: 'search',
    name: 'key-account',
    summary: "The key's own account: its id and name",
    reply: { status: 200, body: KeyAccount },
    handler: async (req, app) => {
      const { id, name } = await getAccount(app.sql, req.auth.accountId)
      return ok({ id, name })
    },
  }),
  route({
    method: 'PATCH',
    path: `${ACCOUNTS}/:id`,
    auth: 'admin',
    name: 'update-account',
    summary: 'Rename an account or change its source of truth',
    body: UpdateAccountBody,
    reply: { status: 200, body: Account },
    handler: async (req, app) => ok(await updateAccount(app.sql, idParam(req, 'id'), req.input)),
  }),
  route({
    method: 'POST',
    path: `${ACCOUNTS}/:id/keys`,
    auth: 'admin',
    name: 'create-key',
    summary: 'Create an API key (the token is shown only here)',
    body: CreateKeyBody,
    reply: { status: 201, body: NewKey },
    handler: async (req, app) =>
      ok(await createKey(app.sql, await accountIn(req, app), req.input), 201),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNTS}/:id/keys`,
    auth: 'admin',
    name: 'list-keys',
    summary: 'List API keys',
    reply: { status: 200, body: v.array(Key) },
    handler: async (req, app) => ok(await listKeys(app.sql, await accountIn(req, app))),
  }),
  route({
    method: 'DELETE',
    path: `${ACCOUNTS}/:id/keys/:key_id`,
    auth: 'admin',
    name: 'revoke-key',
    summary: 'Revoke an API key',
    reply: { status: 204 },
    handler: async (req, app) => {
      await revokeKey(app.sql, await accountIn(req, app), idParam(req, 'key_id'))
      app.keys.forget()
      return noContent
    },
  }),
  route({
    method: 'PUT',
    path: `${ACCOUNTS}/:id/tracking`,
    auth: 'admin',
    name: 'set-tracking',
    summary: 'Set the tracking domains',
    body: TrackingBody,
    reply: { status: 200, body: Account },
    handler: async (req, app) =>
      ok(await setTrackingDomains(app.sql, await accountIn(req, app), req.input.domains)),
  }),
]
