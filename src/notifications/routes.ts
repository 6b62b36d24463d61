import * as v from 'valibot'
import { accountIn } from '../accounts/accounts.ts'
import { ok, type Route, route } from '../route.ts'
import { listNotifications, Notification, NotificationQuery } from './notifications.ts'

export const notificationRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/admin/v1/accounts/:id/notifications',
    auth: 'admin',
    name: 'list-notifications',
    reply: { status: 200, body: v.array(Notification) },
    query: NotificationQuery,
    summary: 'List notifications (?user_email=)',
    handler: async (req, app) =>
      ok(await listNotifications(app.sql, await accountIn(req, app), req.queryInput.user_email)),
  }),
]
