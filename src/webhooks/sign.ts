import { createHmac, randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'

// The whsec_ prefix plus base64 makes the secret usable as-is by Standard Webhooks libraries,
// while the interface spec's HMAC header keys on the same string verbatim.
const SECRET_PREFIX = 'whsec_'

export const generateSecret = () => SECRET_PREFIX + randomBytes(24).toString('base64')

// Keyed with the whole secret string (prefix included): that is what the subscriber was shown
// and what a plain HMAC receiver such as @octokit/webhooks-methods feeds to createHmac.
export const hmacHeader = (secret: string, body: string | Buffer) =>
  'sha256=' + createHmac('sha256', secret).update(body).digest('hex')

// One signature per secret, space-separated as Standard Webhooks allows: during a rotation's grace
// period a receiver holding either the new or the old secret finds one that verifies.
// Standard Webhooks keys on the decoded bytes after the prefix, not on the string itself. They are
// decoded here, as leniently as ever: the library throws on a secret that is not strict base64 or
// decodes to nothing. The service only stores secrets of generateSecret, so such a secret is a row
// written by hand; it signs nothing rather than failing the delivery before it is even tried.
const standardKey = (secret: string) =>
  Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  )

export const standardWebhookHeaders = (
  secrets: string[],
  messageId: string,
  timestampSeconds: number,
  body: string | Buffer,
) => ({
  'webhook-id': messageId,
  'webhook-timestamp': String(timestampSeconds),
  'webhook-signature': secrets
    .map(standardKey)
    .filter((key) => key.length > 0)
    .map((key) =>
      new Webhook(key, { format: 'raw' }).sign(messageId, new Date(timestampSeconds * 1000), body),
    )
    .join(' '),
})
