import * as v from 'valibot'
import { refuse } from '../errors.ts'
import { requeue } from '../webhooks/deliveries.ts'
import { generateSecret } from '../webhooks/sign.ts'
import { checkWebhookTarget, type Resolve } from '../webhooks/ssrf.ts'
import type { Sql, Tx } from '../db/client.ts'
import { storable, strict } from '../validate.ts'

export const WEBHOOK_EVENTS = ['customer.created'] as const

export const WebhookBody = strict({
  url: v.pipe(v.string(), v.url('Must be an absolute URL.'), v.maxLength(2048), storable),
  events: v.pipe(v.array(v.picklist(WEBHOOK_EVENTS)), v.minLength(1)),
  name: v.optional(v.pipe(v.string(), v.maxLength(255), storable)),
})

const columns = (sql: Sql | Tx) => sql`id, url, events, name, active, created_at`

export const addWebhook = async (
  sql: Sql,
  accountId: number,
  body: v.InferOutput<typeof WebhookBody>,
  allowPrivate: boolean,
  resolve?: Resolve,
) => {
  const problem = await checkWebhookTarget(body.url, allowPrivate, resolve)
  if (problem) refuse(400, 'The webhook URL is not allowed.', [{ path: '/url', message: problem }])
  const secret = generateSecret()
  const [hook] = await sql`
    insert into webhooks (account_id, url, events, name, secret)
    values (${accountId}, ${body.url}, ${[...new Set(body.events)]}, ${body.name ?? null}, ${secret})
    returning ${columns(sql)}`
  return { ...hook, secret }
}

export const listWebhooks = (sql: Sql, accountId: number) =>
  sql`select ${columns(sql)} from webhooks where account_id = ${accountId} order by id`

export const removeWebhook = async (sql: Sql, accountId: number, id: number) => {
  const [hook] = await sql`delete from webhooks where account_id = ${accountId} and id = ${id} returning id`
  if (!hook) refuse(404, `Webhook ${id} does not exist.`)
}

// The replaced secret keeps signing beside the new one for graceSeconds, so that receivers can switch
// over without a gap; rotating again within that time drops the oldest.
export const rotateSecret = async (sql: Sql, accountId: number, id: number, graceSeconds: number) => {
  const secret = generateSecret()
  const [hook] = await sql`
    update webhooks set secret = ${secret}, previous_secret = secret,
      previous_secret_until = now() + make_interval(secs => ${graceSeconds})
    where account_id = ${accountId} and id = ${id} returning id`
  return hook ? { secret } : refuse(404, `Webhook ${id} does not exist.`)
}

// Starts the endpoint's health record afresh and sends, oldest first, the deliveries held while it
// was disabled; enabling an active webhook changes nothing.
export const enableWebhook = (sql: Sql, accountId: number, id: number) =>
  sql.begin(async (tx) => {
    const [was] = await tx`select active from webhooks where account_id = ${accountId} and id = ${id} for update`
    if (!was) refuse(404, `Webhook ${id} does not exist.`)
    const [hook] = await tx`
      update webhooks set active = true, failing_since = null
      where account_id = ${accountId} and id = ${id} returning ${columns(tx)}`
    const resumed = was.active ? [] : await requeue(tx, accountId, id, tx`d.status = 'pending'`)
    return { ...hook, resumed: resumed.length }
  })
