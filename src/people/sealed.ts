import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'
import { refuse } from '../errors.ts'

// A secret the service must use again but keeps only sealed (an SSO client secret): AES-256-GCM
// under a key derived from SERVICE_SECRET_KEY, which lives in the environment and never in the
// database, so a copy of the database or a backup gives no secret. The stored text is
// `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url); the key id (a digest of the key) tells a wrong
// key from a damaged text. `bound` (the account id) is authenticated with it: a sealed text copied
// to another account's row does not open there.

const VERSION = 'v1'
const keyOf = (secretKey: string) =>
  Buffer.from(hkdfSync('sha256', secretKey, '', 'service secrets at rest v1', 32))
const idOf = (key: Buffer) => createHash('sha256').update(key).digest('base64url').slice(0, 8)

const NO_KEY =
  'This service has no SERVICE_SECRET_KEY, which single sign-on needs to keep its client secret.'

export const seal = (secretKey: string | undefined, plain: string, bound: string) => {
  if (!secretKey) return refuse(503, NO_KEY)
  const key = keyOf(secretKey)
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(bound))
  const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return [
    VERSION,
    idOf(key),
    iv.toString('base64url'),
    cipher.getAuthTag().toString('base64url'),
    data.toString('base64url'),
  ].join('.')
}

const UNOPENED =
  'The client secret cannot be opened with this SERVICE_SECRET_KEY (another key sealed it): set the SSO again.'

export const open = (secretKey: string | undefined, sealed: string, bound: string) => {
  if (!secretKey) return refuse(503, NO_KEY)
  const key = keyOf(secretKey)
  const [version, id, iv, tag, data] = sealed.split('.')
  if (version !== VERSION || id !== idOf(key) || !data) return refuse(503, UNOPENED)
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), {
      authTagLength: 16,
    })
      .setAAD(Buffer.from(bound))
      .setAuthTag(Buffer.from(tag, 'base64url'))
    return Buffer.concat([
      decipher.update(Buffer.from(data, 'base64url')),
      decipher.final(),
    ]).toString('utf8')
  } catch {
    return refuse(503, UNOPENED)
  }
}
