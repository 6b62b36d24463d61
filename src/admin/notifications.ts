import type { Sql } from '../db/client.ts'

// Newest first; optionally one user's, by email (case-insensitive).
export const listNotifications = (sql: Sql, accountId: number, userEmail?: string) => sql`
  select n.id, u.email as user_email, n.kind, n.body, n.created_at
  from notifications n join users u on u.account_id = n.account_id and u.id = n.user_id
  where n.account_id = ${accountId} ${userEmail ? sql`and lower(u.email) = lower(${userEmail})` : sql``}
  order by n.id desc limit 500`
