import type { Sql } from '../db/client.ts'
import type { Session } from '../route.ts'
import { csrfTokenOf, newSecret, readSecret } from './secrets.ts'

const SESSION_COOKIE = 'service_session'
// A session ends after this long unused, and this long after its sign-in whatever its use.
const IDLE = '12 hours'
export const LIFETIME = '7 days'
// Its last use is written at most this often (seconds), so that a session's reads stay reads.
const TOUCH_SECONDS = 60

// A new session for the user: always a new secret, so a cookie set before sign-in (fixation) is
// never the one that signs in. The user's ended sessions are cleared on the way.
export const openSession = async (sql: Sql, accountId: number, userId: number) => {
  const { value, hash } = newSecret(accountId)
  await sql`delete from sessions where account_id = ${accountId} and user_id = ${userId}
    and (last_seen_at < now() - ${IDLE}::interval or created_at < now() - ${LIFETIME}::interval)`
  await sql`insert into sessions (account_id, user_id, secret_hash)
    values (${accountId}, ${userId}, ${hash})`
  return value
}

// The live session a cookie names, with its user as they are now (a role changed takes effect at
// once), or undefined. Every statement names the account, so it runs on one shard.
export const findSession = async (
  sql: Sql,
  cookie: string | undefined,
): Promise<Session | undefined> => {
  const read = readSecret(cookie)
  if (!read) return undefined
  const { accountId } = read
  const [row] = await sql`
    select s.id, s.user_id, u.email, u.name, u.role,
      s.last_seen_at < now() - ${TOUCH_SECONDS} * interval '1 second' as stale
    from sessions s join users u on u.account_id = ${accountId} and u.id = s.user_id
    where s.account_id = ${accountId} and s.secret_hash = ${read.hash}
      and s.last_seen_at > now() - ${IDLE}::interval
        and s.created_at > now() - ${LIFETIME}::interval`
  if (!row) return undefined
  if (row.stale)
    await sql`update sessions set last_seen_at = now() where account_id = ${accountId}
      and id = ${row.id}`
  return {
    id: Number(row.id),
    accountId,
    userId: Number(row.user_id),
    email: row.email,
    name: row.name,
    role: row.role,
    csrfToken: csrfTokenOf(read.secret),
  }
}

export const closeSession = (sql: Sql, session: Session) =>
  sql`delete from sessions where account_id = ${session.accountId} and id = ${session.id}`

export const cookieValue = (header: string | undefined, cookie = SESSION_COOKIE) => {
  for (const part of (header ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=')
    if (name === cookie) return value.join('=')
  }
  return undefined
}

// Secure when people open the service over https; Lax keeps the cookie off cross-site POSTs.
export const setCookie = (
  value: string,
  publicUrl: string | undefined,
  maxAge?: number,
  name = SESSION_COOKIE,
) =>
  [
    `${name}=${value}`,
    'HttpOnly',
    'SameSite=Lax',
    'Path=/',
    ...(publicUrl?.startsWith('https:') ? ['Secure'] : []),
    ...(maxAge === undefined ? [] : [`Max-Age=${maxAge}`]),
  ].join('; ')

// The request comes from a page of the service itself: its Origin is SERVICE_PUBLIC_URL's, or
// without one, names the host the request was sent to.
export const fromOwnOrigin = (
  origin: string | undefined,
  host: string | undefined,
  publicUrl: string | undefined,
) => {
  if (!origin || !URL.canParse(origin)) return false
  const given = new URL(origin)
  return publicUrl ? given.origin === new URL(publicUrl).origin : !!host && given.host === host
}
