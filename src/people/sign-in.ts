import type { App } from '../context.ts'
import { getAccount } from '../accounts/accounts.ts'
import { refuse } from '../errors.ts'
import { ROLE_GRANTS, type Role } from '../route.ts'
import { dummyHash, verifyPassword } from './passwords.ts'
import { openSession } from './sessions.ts'
import { csrfTokenOf, readSecret } from './secrets.ts'

const MAX_FAILURES = 10
const FAILURE_WINDOW = '15 minutes'

// Failures of one email in the window, and the seconds until the oldest leaves it.
const failures = async (app: App, email: string) =>
  (
    await app.admin`
      select count(*)::int as n,
        ceil(extract(epoch from min(at) + ${FAILURE_WINDOW}::interval - now()))::int as retry
      from sign_in_failures where email = ${email} and at > now() - ${FAILURE_WINDOW}::interval`
  )[0] as { n: number; retry: number | null }

// Old failures of any email go as new ones come, so the table holds one window's worth.
const recordFailure = async (app: App, email: string) => {
  await app.admin`insert into sign_in_failures (email) values (${email})`
  await app.admin`delete from sign_in_failures where at < now() - ${FAILURE_WINDOW}::interval`
}

// The users an email signs in as: before the account is known, this reads every account (the admin
// pool's service-admin connections; on Citus, every shard). Everything after names the account.
const candidates = (app: App, email: string) => app.admin`
  select account_id, id, password_hash from users where lower(email) = ${email} and password_hash is not null
  order by account_id, id`

const WRONG = 'The email or the password is wrong.'

// One scrypt verification for an unknown email as for a known one (against a dummy hash), one
// message for either mistake, and past MAX_FAILURES in the window a 429 whatever the password.
export const signIn = async (app: App, emailGiven: string, password: string) => {
  const email = emailGiven.trim().toLowerCase()
  const locked = await failures(app, email)
  if (locked.n >= MAX_FAILURES)
    refuse(429, `Too many failed sign-ins for this email; try again later.`, undefined, {
      'retry-after': String(Math.max(1, locked.retry ?? 1)),
    })
  const users = await candidates(app, email)
  let found: (typeof users)[number] | undefined
  if (!users.length) await verifyPassword(password, await dummyHash())
  for (const u of users) if (!found && (await verifyPassword(password, u.password_hash))) found = u
  if (!found) {
    await recordFailure(app, email)
    return refuse(401, WRONG)
  }
  await app.admin`delete from sign_in_failures where email = ${email}`
  const accountId = Number(found.account_id)
  const cookie = await openSession(app.sql, accountId, Number(found.id))
  return {
    cookie,
    ...(await whoIs(app, accountId, Number(found.id), csrfTokenOf(readSecret(cookie)!.secret))),
  }
}

// What sign-in and GET /auth/v1/me answer: the person, their account, the CSRF token and the role's
// grants (for the console to hide what the role cannot do).
export const whoIs = async (app: App, accountId: number, userId: number, csrfToken: string) => {
  const [user] =
    await app.sql`select id, email, name, role from users where account_id = ${accountId}
      and id = ${userId}`
  const { id, name } = await getAccount(app.sql, accountId)
  const role = user.role as Role
  return {
    user: user as { id: number; email: string; name: string | null; role: Role },
    account: { id, name },
    csrf_token: csrfToken,
    grants: ROLE_GRANTS[role],
  }
}
