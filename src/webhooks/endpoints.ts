import * as v from 'valibot'
import { refuse } from '../errors.ts'
import { requeue } from './deliveries.ts'
import { EVENTS, type EventName, examplePayload } from './events.ts'
import { enqueuePayloads } from './outbox.ts'
import { generateSecret } from './sign.ts'
import { checkWebhookTarget, type Resolve } from './ssrf.ts'
import type { Sql, Tx } from '../db/client.ts'
import { storable, strict } from '../validate.ts'

const events = v.pipe(v.array(v.picklist(EVENTS)), v.minLength(1))
const name = v.pipe(v.string(), v.maxLength(255), storable)
const rateLimit = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))

export const WebhookBody = strict({
  url: v.pipe(v.string(), v.url('Must be an absolute URL.'), v.maxLength(2048), storable),
  events,
  name: v.optional(name),
  rate_limit: v.optional(v.nullable(rateLimit)),
})
// A change of nothing is refused rather than answered as if something changed.
export const WebhookPatch = v.pipe(
  strict({
    events: v.optional(events),
    name: v.optional(v.nullable(name)),
    rate_limit: v.optional(v.nullable(rateLimit)),
  }),
  v.check((b) => Object.keys(b).length > 0, 'Give events, name, rate_limit or several.'),
  v.metadata({ minProperties: 1 }),
)
export const TestSendBody = strict({ event: v.picklist(EVENTS) })

// Health beside the settings: the latest failed attempt and who disabled the endpoint, if anyone.
const columns = (
  sql: Sql | Tx,
) => sql`id, url, events, name, active, rate_limit, created_at, failing_since,
  disabled_by, last_failure_at, last_failure_status, last_failure_error`

// The last failure as one object, built here rather than in SQL: the columns come back from
// RETURNING clauses, where Citus allows no non-immutable function (to_char, json_build_object).
const shaped = <T extends Record<string, any>>(row: T) => {
  const {
    last_failure_at: at,
    last_failure_status: status,
    last_failure_error: error,
    ...hook
  } = row
  return {
    ...hook,
    last_failure:
      at === null ? null : { at: (at as Date).toISOString(), status_code: status, error },
  }
}

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
    insert into webhooks (account_id, url, events, name, rate_limit, secret)
    values (${accountId}, ${body.url}, ${[...new Set(body.events)]}, ${body.name ?? null},
      ${body.rate_limit ?? null},
      ${secret})
    returning ${columns(sql)}`
  return { ...shaped(hook), secret }
}

export const listWebhooks = (sql: Sql, accountId: number) =>
  sql`select ${columns(sql)} from webhooks where account_id = ${accountId} order by id`.then(
    (rows) => rows.map(shaped),
  )

// Changes what the subscription receives from now on; deliveries already made keep their event.
export const updateWebhook = async (
  sql: Sql,
  accountId: number,
  id: number,
  patch: v.InferOutput<typeof WebhookPatch>,
) => {
  const [hook] = await sql`
    update webhooks set
      events = coalesce(${patch.events ? [...new Set(patch.events)] : null}::text[], events),
      name = case when ${patch.name !== undefined} then ${patch.name ?? null}::text else name end,
      rate_limit = case when ${patch.rate_limit !== undefined}
        then ${patch.rate_limit ?? null}::integer
        else rate_limit end
    where account_id = ${accountId} and id = ${id} returning ${columns(sql)}`
  return hook ? shaped(hook) : refuse(404, `Webhook ${id} does not exist.`)
}

// The event's catalog example, signed and delivered like any other delivery (and logged with them).
export const testSend = async (sql: Sql, accountId: number, id: number, event: EventName) =>
  sql.begin(async (tx) => {
    const [hook] =
      await tx`select active from webhooks where account_id = ${accountId} and id = ${id}`
    if (!hook) refuse(404, `Webhook ${id} does not exist.`)
    if (!hook.active) refuse(409, `Webhook ${id} is disabled; enable it first.`)
    const [delivery] = await enqueuePayloads(
      tx,
      accountId,
      event,
      [id],
      [examplePayload(event, new Date().toISOString())],
    )
    return { delivery_id: delivery.id, event }
  })

export const removeWebhook = async (sql: Sql, accountId: number, id: number) => {
  const [hook] =
    await sql`delete from webhooks where account_id = ${accountId} and id = ${id} returning id`
  if (!hook) refuse(404, `Webhook ${id} does not exist.`)
}

// The replaced secret keeps signing beside the new one for graceSeconds, so that receivers can
// switch over without a gap; rotating again within that time drops the oldest.
export const rotateSecret = async (
  sql: Sql,
  accountId: number,
  id: number,
  graceSeconds: number,
) => {
  const secret = generateSecret()
  const [hook] = await sql`
    update webhooks set secret = ${secret}, previous_secret = secret,
      previous_secret_until = now() + make_interval(secs => ${graceSeconds})
    where account_id = ${accountId} and id = ${id} returning id`
  return hook ? { secret } : refuse(404, `Webhook ${id} does not exist.`)
}

// An operator's pause: deliveries are held (pending, not attempted) as for an endpoint the service
// disabled, until enableWebhook sends them.
export const disableWebhook = async (sql: Sql, accountId: number, id: number) => {
  const [hook] = await sql`
    update webhooks set active = false, disabled_by = case
      when active then 'operator' else disabled_by end
    where account_id = ${accountId} and id = ${id} returning ${columns(sql)}`
  return hook ? shaped(hook) : refuse(404, `Webhook ${id} does not exist.`)
}

// Starts the endpoint's health record afresh and sends, oldest first, the deliveries held while it
// was disabled; enabling an active webhook changes nothing.
export const enableWebhook = (sql: Sql, accountId: number, id: number) =>
  sql.begin(async (tx) => {
    const [was] = await tx`select active from webhooks where account_id = ${accountId}
        and id = ${id} for update`
    if (!was) refuse(404, `Webhook ${id} does not exist.`)
    const [hook] = await tx`
      update webhooks set active = true, failing_since = null, disabled_by = null
      where account_id = ${accountId} and id = ${id} returning ${columns(tx)}`
    const resumed = was.active ? [] : await requeue(tx, accountId, id, tx`d.status = 'pending'`)
    return { ...shaped(hook), resumed: resumed.length }
  })
