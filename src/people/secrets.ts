import { createHash, randomBytes } from 'node:crypto'
import { hashToken } from '../db/key-check.ts'

// A session cookie and an invite or reset link carry `<account id>.<secret>`: the account id lets
// every lookup stay inside one tenant (one shard on Citus), as an API key's sk_<account>_ does.
// Only the SHA-256 of the secret is stored, so a copy of the database opens no session.
export const newSecret = (accountId: number) => {
  const secret = randomBytes(32).toString('base64url')
  return { value: `${accountId}.${secret}`, hash: hashToken(secret), secret }
}

export const readSecret = (value: string | undefined) => {
  const m = /^(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(value ?? '')
  return m ? { accountId: Number(m[1]), hash: hashToken(m[2]), secret: m[2] } : undefined
}

// The CSRF token of a session: derived from its secret, so nothing more is stored, and one-way, so
// the token (which scripts of the page read) does not give the cookie (which they cannot).
export const csrfTokenOf = (secret: string) =>
  createHash('sha256').update(`csrf:${secret}`).digest('base64url')
