import { createHmac, randomBytes } from 'node:crypto'

// The whsec_ prefix plus base64 makes the secret usable as-is by Standard Webhooks libraries,
// while the interface spec's HMAC header keys on the same string verbatim.
const SECRET_PREFIX = 'whsec_'

export const generateSecret = () => SECRET_PREFIX + randomBytes(24).toString('base64')

// Keyed with the whole secret string (prefix included): that is what the subscriber was shown
// and what a plain HMAC receiver such as @octokit/webhooks-methods feeds to createHmac.
export const hmacHeader = (secret: string, body: string | Buffer) =>
  'sha256=' + createHmac('sha256', secret).update(body).digest('hex')

// Standard Webhooks keys on the decoded bytes after the prefix, not on the string itself.
const standardKey = (secret: string) =>
  Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64')

// One signature per secret, space-separated as Standard Webhooks allows: during a rotation's grace
// period a receiver holding either the new or the old secret finds one that verifies.
export const standardWebhookHeaders = (
  secrets: string[],
  messageId: string,
  timestampSeconds: number,
  body: string | Buffer,
) => {
  const sign = (secret: string) =>
    createHmac('sha256', standardKey(secret)).update(`${messageId}.${timestampSeconds}.`).update(body).digest('base64')
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((secret) => `v1,${sign(secret)}`).join(' '),
  }
}
