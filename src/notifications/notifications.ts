import type { JSONValue } from 'postgres'
import * as v from 'valibot'
import type { Sql, Tx } from '../db/client.ts'
import { id, nonEmpty, Timestamp } from '../validate.ts'

// What the account's users are told of (an upload or file import processed, a webhook disabled):
// the one place that writes notifications, and their list.

// One row per user of the account, its topic in the kind column. Written in the caller's
// transaction where there is one, so that the notice commits with the change it tells of. The users
// are read first and their rows inserted as VALUES: Citus runs an INSERT ... SELECT as a task per
// shard, which a service-api session (one shard per statement) may not.
export const notifyUsers = async (
  sql: Sql | Tx,
  accountId: number,
  topic: string,
  body: Record<string, JSONValue>,
) => {
  const users = await sql<{ id: number }[]>`select id from users where account_id = ${accountId}`
  if (!users.length) return
  const rows = users.map((u) => ({
    account_id: accountId,
    user_id: u.id,
    kind: topic,
    body: sql.json(body),
  }))
  await sql`insert into notifications ${sql(rows)}`
}

// Newest first; optionally one user's, by email (case-insensitive).
export const listNotifications = (sql: Sql, accountId: number, userEmail?: string) => sql`
  select n.id, u.email as user_email, n.kind, n.body, n.created_at
  from notifications n join users u on u.account_id = n.account_id and u.id = n.user_id
  where n.account_id = ${accountId}
    ${userEmail ? sql`and lower(u.email) = lower(${userEmail})` : sql``}
  order by n.id desc limit 500`

export const Notification = v.object({
  id,
  user_email: v.string(),
  kind: v.string(),
  body: v.record(v.string(), v.unknown()),
  created_at: Timestamp,
})

export const NotificationQuery = {
  user_email: {
    description: "Only this user's notifications (its email, in any case).",
    schema: nonEmpty,
  },
}
