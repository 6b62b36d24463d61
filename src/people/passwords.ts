import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'

// scrypt with N = 2^15, r = 8: 32 MiB and some tens of milliseconds per guess, on every core an
// attacker has. The parameters are kept in the stored text, so that they can grow later.
const COST = { N: 2 ** 15, r: 8, p: 1 }
const KEY_BYTES = 32

export const MIN_PASSWORD = 12
export const MAX_PASSWORD = 256

const derive = (password: string, salt: Buffer, { N, r, p }: typeof COST) =>
  new Promise<Buffer>((resolve, reject) =>
    scrypt(password, salt, KEY_BYTES, { N, r, p, maxmem: 256 * N * r }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  )

export const hashPassword = async (password: string) => {
  const salt = randomBytes(16)
  const key = await derive(password, salt, COST)
  return `scrypt$${COST.N}$${COST.r}$${COST.p}$${salt.toString('base64')}$${key.toString('base64')}`
}

// Constant-time in what it compares: the derived keys are of one length.
export const verifyPassword = async (password: string, stored: string) => {
  const [kind, N, r, p, salt, key] = stored.split('$')
  if (kind !== 'scrypt') return false
  const expected = Buffer.from(key, 'base64')
  const given = await derive(password, Buffer.from(salt, 'base64'), {
    N: Number(N),
    r: Number(r),
    p: Number(p),
  })
  return given.length === expected.length && timingSafeEqual(given, expected)
}

// An email without a user, or a user without a password yet, is checked against this hash, so that
// a sign-in costs the same whether the email is known or not.
let dummy: Promise<string> | undefined
export const dummyHash = () => (dummy ??= hashPassword(randomBytes(18).toString('base64')))

// The rule beyond the length the body schema checks: a password is not the email it signs in.
export const passwordRefusal = (password: string, email: string) =>
  password.trim().toLowerCase() === email.trim().toLowerCase()
    ? 'Must not be the email.'
    : undefined
