import { accountIn } from '../accounts/accounts.ts'
import { ok, type Route, route } from '../route.ts'
import { AuditPage, AuditQuery, listEntries, listOperatorEntries } from './entries.ts'

export const auditRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/audit',
    auth: { key: 'audit' },
    query: AuditQuery,
    name: 'list-audit',
    tag: 'audit',
    summary:
      "The account's audit log, newest first: every change made by its keys, its users and the operator",
    reply: { status: 200, body: AuditPage },
    handler: async (req, app) => ok(await listEntries(app.sql, req.auth.accountId, req.queryInput)),
  }),
  route({
    method: 'GET',
    path: '/admin/v1/accounts/:id/audit',
    auth: 'admin',
    query: AuditQuery,
    name: 'list-account-audit',
    summary: "An account's audit log, newest first",
    reply: { status: 200, body: AuditPage },
    handler: async (req, app) =>
      ok(await listEntries(app.sql, await accountIn(req, app), req.queryInput)),
  }),
  route({
    method: 'GET',
    path: '/admin/v1/audit',
    auth: 'admin',
    query: AuditQuery,
    name: 'list-operator-audit',
    summary: "The operator's changes that name no account (backups), newest first",
    reply: { status: 200, body: AuditPage },
    handler: async (req, app) => ok(await listOperatorEntries(app.sql, req.queryInput)),
  }),
]
