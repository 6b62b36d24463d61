import * as v from 'valibot'
import { forgetUser } from '../audit/entries.ts'
import { alreadyExists } from '../catalog/exists.ts'
import type { Sql, Tx } from '../db/client.ts'
import { refuse } from '../errors.ts'
import { ROLES } from '../route.ts'
import { describe, id, storable, strict } from '../validate.ts'
import { hashPassword, MAX_PASSWORD, MIN_PASSWORD, passwordRefusal } from './passwords.ts'
import { newSecret, readSecret } from './secrets.ts'

const Role = describe(
  v.picklist(ROLES),
  'viewer: reads what a `search` key reads; manager: also writes what an `upload` key writes; admin: also ' +
    "the account's users, keys, properties, scoring model, webhooks and SSO.",
)

export const UserBody = strict({
  email: v.pipe(v.string(), v.trim(), v.email(), v.maxLength(255), storable),
  name: v.optional(v.pipe(v.string(), v.maxLength(255), storable)),
  role: v.optional(Role, 'viewer'),
})

// A change of a user's role: the only field a PATCH takes, for now.
export const RoleBody = strict({ role: Role })

export const User = v.object({ id, email: v.string(), name: v.nullable(v.string()), role: Role })

export const Invite = v.object({
  ...User.entries,
  invite_token: describe(
    v.string(),
    'Sets the password once (POST /auth/v1/password), within 7 days.',
  ),
  invite_url: describe(
    v.string(),
    'The console page that takes the invite token; give it to the person.',
  ),
})

export const ResetLink = v.object({
  reset_token: describe(
    v.string(),
    'Sets a new password once (POST /auth/v1/password), within 1 day.',
  ),
  reset_url: describe(
    v.string(),
    'The console page that takes the reset token; give it to the person.',
  ),
})

export const PasswordBody = strict({
  token: v.pipe(v.string(), v.maxLength(100)),
  password: v.pipe(v.string(), v.minLength(MIN_PASSWORD), v.maxLength(MAX_PASSWORD)),
})

const LIFETIME = { invite: '7 days', reset: '1 day' } as const
type Purpose = keyof typeof LIFETIME

// The console's page for a link; `base` is SERVICE_PUBLIC_URL or the address the request came to.
const linkUrl = (base: string, token: string) => `${base}/console#password=${token}`

const userColumns = (sql: Sql | Tx) => sql`id, email, name, role`

// A link for a user of the account. Two statements, not INSERT ... SELECT: Citus runs that as a
// multi-shard plan even when both sides name one account.
const makeLink = async (
  sql: Sql | Tx,
  accountId: number,
  userId: number,
  purpose: Purpose,
  base: string,
) => {
  const { value, hash } = newSecret(accountId)
  await sql`
    insert into user_tokens (account_id, user_id, purpose, secret_hash, expires_at)
    values (${accountId}, ${userId}, ${purpose}, ${hash}, now() + ${LIFETIME[purpose]}::interval)`
  return { token: value, url: linkUrl(base, value) }
}

// The user and their invite link, in one transaction: no user without a way in.
export const inviteUser = (
  sql: Sql,
  accountId: number,
  body: v.InferOutput<typeof UserBody>,
  base: string,
) =>
  sql.begin(async (tx) => {
    const [user] = await tx`
      insert into users (account_id, email, name, role)
        values (${accountId}, ${body.email}, ${body.name ?? null},
        ${body.role}) returning ${userColumns(tx)}`.catch(
      alreadyExists(`A user with email ${body.email}`),
    )
    const link = await makeLink(tx, accountId, user.id, 'invite', base)
    return { ...user, invite_token: link.token, invite_url: link.url }
  })

export const resetLink = async (sql: Sql, accountId: number, userId: number, base: string) => {
  const [user] = await sql`select id from users where account_id = ${accountId} and id = ${userId}`
  if (!user) refuse(404, `User ${userId} does not exist.`)
  const link = await makeLink(sql, accountId, userId, 'reset', base)
  return { reset_token: link.token, reset_url: link.url }
}

export const listUsers = (sql: Sql, accountId: number) =>
  sql`select ${userColumns(sql)} from users where account_id = ${accountId} order by id`

// The user, if it is the account's, and the account's admins, locked: two admins who demote or
// remove each other at once are taken one after the other, and the second sees the first's change
// (FOR UPDATE reads the row as committed), so an account never loses its last admin by a race.
const lockAdmins = async (tx: Sql | Tx, accountId: number, userId: number) => {
  const rows = await tx`select id, role from users where account_id = ${accountId}
    and (id = ${userId} or role = 'admin') order by id for update`
  const user =
    rows.find((r) => Number(r.id) === userId) ?? refuse(404, `User ${userId} does not exist.`)
  return { user, admins: rows.filter((r) => r.role === 'admin').length }
}

const LAST_ADMIN =
  'This is the account’s last admin: make another user admin first, so that someone can still manage the account.'

// A role changed takes effect at once: a session reads its user's role on every request.
export const setRole = (
  sql: Sql,
  accountId: number,
  userId: number,
  role: v.InferOutput<typeof Role>,
) =>
  sql.begin(async (tx) => {
    const { user, admins } = await lockAdmins(tx, accountId, userId)
    if (user.role === 'admin' && role !== 'admin' && admins === 1) refuse(409, LAST_ADMIN)
    const [changed] = await tx`update users set role = ${role}
      where account_id = ${accountId} and id = ${userId} returning ${userColumns(tx)}`
    return changed
  })

// Its sessions and links go with it (foreign keys); the customers it owned keep the id, now
// unknown. The audit log keeps what the user did, but no longer who they were: the entries
// they made lose their name (their email or name then), as an erasure blanks what names
// an erased person.
export const removeUser = (sql: Sql, accountId: number, userId: number) =>
  sql.begin(async (tx) => {
    const { user, admins } = await lockAdmins(tx, accountId, userId)
    if (user.role === 'admin' && admins === 1) refuse(409, LAST_ADMIN)
    await tx`delete from users where account_id = ${accountId} and id = ${userId}`
    await forgetUser(tx, accountId, userId)
  })

const BAD_LINK =
  'This link is not valid: it was used already, it has expired, or it does not exist.'

// Takes up an invite or a reset: the link is spent, every other link of the user too, and every
// session of the user ends (a password change signs everyone out), in one transaction.
export const setPassword = async (sql: Sql, body: v.InferOutput<typeof PasswordBody>) => {
  const link =
    readSecret(body.token) ?? refuse(400, BAD_LINK, [{ path: '/token', message: BAD_LINK }])
  const hash = await hashPassword(body.password)
  const { accountId } = link
  return sql.begin(async (tx) => {
    const [taken] = await tx`
      update user_tokens t set used_at = now() from users u
      where t.account_id = ${accountId} and t.secret_hash = ${link.hash} and t.used_at is null
        and t.expires_at > now() and u.account_id = ${accountId} and u.id = t.user_id
      returning u.id, u.email`
    if (!taken) refuse(400, BAD_LINK, [{ path: '/token', message: BAD_LINK }])
    const same = passwordRefusal(body.password, taken.email)
    if (same) refuse(400, 'The password is not acceptable.', [{ path: '/password', message: same }])
    await tx`update user_tokens set used_at = now()
      where account_id = ${accountId} and user_id = ${taken.id} and used_at is null`
    await tx`delete from sessions where account_id = ${accountId} and user_id = ${taken.id}`
    const [user] = await tx`update users set password_hash = ${hash}
      where account_id = ${accountId} and id = ${taken.id} returning ${userColumns(tx)}`
    return user
  })
}
