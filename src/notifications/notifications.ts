import type { JSONValue } from 'postgres'
import * as v from 'valibot'
import type { Sql, Tx } from '../db/client.ts'
import { id, nonEmpty, Timestamp } from '../validate.ts'

// What the account's users are told of (an upload or file import processed, a webhook disabled):
// the one place that writes notifications, and their list.

// One row per user of the account, its topic in the kind column. Written in the caller's
// transaction where there is one, so that the notice commits with the change it tells of.
export const notifyUsers = (sql: Sql | Tx, accountId: number, topic: string, body: Record<string, JSONValue>) => sql`
  insert into notifications (account_id, user_id, kind, body)
  select ${accountId}, u.id, ${topic}, ${sql.json(body)} from users u where u.account_id = ${accountId}`

// Newest first; optionally one user's, by email (case-insensitive).
export const listNotifications = (sql: Sql, accountId: number, userEmail?: string) => sql`
  select n.id, u.email as user_email, n.kind, n.body, n.created_at
  from notifications n join users u on u.account_id = n.account_id and u.id = n.user_id
  where n.account_id = ${accountId} ${userEmail ? sql`and lower(u.email) = lower(${userEmail})` : sql``}
  order by n.id desc limit 500`

export const Notification = v.object({
  id,
  user_email: v.string(),
  kind: v.string(),
  body: v.record(v.string(), v.unknown()),
  created_at: Timestamp,
})

export const NotificationQuery = {
  user_email: { description: "Only this user's notifications (its email, in any case).", schema: nonEmpty },
}
