import type { Sql, Tx } from '../db/client.ts'

// Newest first; optionally one user's, by email (case-insensitive).
export const listNotifications = (sql: Sql, accountId: number, userEmail?: string) => sql`
  select n.id, u.email as user_email, n.kind, n.body, n.created_at
  from notifications n join users u on u.account_id = n.account_id and u.id = n.user_id
  where n.account_id = ${accountId} ${userEmail ? sql`and lower(u.email) = lower(${userEmail})` : sql``}
  order by n.id desc limit 500`

// One row per user of the account, written in the caller's transaction so that the notice commits
// with the change it tells of.
export const notifyUsers = (tx: Tx, accountId: number, kind: string, body: Record<string, unknown>) => tx`
  insert into notifications (account_id, user_id, kind, body)
  select ${accountId}, u.id, ${kind}, ${tx.json(body as never)} from users u where u.account_id = ${accountId}`
