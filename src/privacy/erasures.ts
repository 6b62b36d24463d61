import type { JobHelpers } from 'graphile-worker'
import { lastAttempt } from '../db/queue.ts'
import * as v from 'valibot'
import type { App } from '../context.ts'
import type { Sql } from '../db/client.ts'
import { addJobs, type ErasePayload, eraseJob } from '../db/jobs.ts'
import { refuse } from '../errors.ts'
import { erase } from './erase.ts'
import type { ErasureBody } from './schemas.ts'

// Erasure requests (docs/api.md, "Privacy"): the request and its targets are stored with the job
// that erases them, in one transaction; the answer is 202 and the status is read back by id.

export const requestErasure = (
  sql: Sql,
  accountId: number,
  keyId: number | null,
  body: v.InferOutput<typeof ErasureBody>,
) =>
  sql.begin(async (tx) => {
    const [row] = await tx<{ id: number; status: 'pending' }[]>`
      insert into erasures (account_id, key_id, requested)
      select id, ${keyId},
      ${tx.json({ contacts: body.contacts.length, customers: body.customers.length })}
      from accounts where id = ${accountId}
      returning id, status`
    if (!row) refuse(404, `Account ${accountId} does not exist.`)
    const targets = [
      ...body.customers.map((c) => [c, null]),
      ...body.contacts.map((c) => [c.customer_external_id, c.contact_external_id]),
    ]
    await tx`
      insert into erasure_targets (account_id, erasure_id, customer_external_id,
        contact_external_id)
      select ${accountId}, ${row.id}, t->>0, t->>1
        from json_array_elements(${JSON.stringify(targets)}::text::json) t`
    await addJobs(tx, [eraseJob(accountId, row.id)])
    return { id: row.id, status: row.status }
  })

export const getErasure = async (sql: Sql, accountId: number, erasureId: number) => {
  const [row] = await sql`
    select id, status, key_id, requested_at, finished_at, requested, counts from erasures
    where account_id = ${accountId} and id = ${erasureId}`
  return row ?? refuse(404, `Erasure ${erasureId} does not exist.`)
}

// The job. A failure is retried; after the last attempt the request is marked failed and its
// targets are forgotten all the same (they name people): the client asks again.
export const runErasure = async (app: App, p: ErasePayload, helpers: JobHelpers) => {
  try {
    return await app.sql.begin(async (tx) => {
      const [pending] = await tx`select 1 from erasures
        where account_id = ${p.account_id} and id = ${p.erasure_id}
          and status = 'pending' for update`
      if (!pending) return { erasure: p.erasure_id, outcome: 'not pending' }
      const counts = await erase(tx, p.account_id, p.erasure_id)
      await tx`update erasures set status = 'done', finished_at = now(), counts = ${tx.json(counts)}
        where account_id = ${p.account_id} and id = ${p.erasure_id}`
      return { erasure: p.erasure_id, ...counts }
    })
  } catch (err) {
    if (lastAttempt(helpers.job)) {
      await app.sql.begin(async (tx) => {
        await tx`delete from erasure_targets where account_id = ${p.account_id}
          and erasure_id = ${p.erasure_id}`
        await tx`update erasures set status = 'failed', finished_at = now()
          where account_id = ${p.account_id} and id = ${p.erasure_id} and status = 'pending'`
      })
    }
    throw err
  }
}
