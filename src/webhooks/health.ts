import { notifyUsers } from '../notifications/notifications.ts'
import type { Tx } from '../db/client.ts'
import type { SendResult } from './send.ts'

// Standard Webhooks: the receiver says the endpoint is gone for good, so nothing is tried again.
const GONE = 410

// Called in the transaction that logs an attempt. A delivered attempt ends the endpoint's run of
// failures; a failed one starts it, and once the run has lasted disableAfterSeconds (or at once on
// 410 Gone) the endpoint is disabled and every user of the account is told, in that same commit.
export const recordHealth = async (
  tx: Tx,
  accountId: number,
  webhookId: number,
  result: SendResult,
  disableAfterSeconds: number,
) => {
  if (result.outcome === 'delivered') {
    await tx`
      update webhooks set failing_since = null
      where account_id = ${accountId} and id = ${webhookId} and failing_since is not null`
    return
  }
  const gone = result.status_code === GONE
  // least() and a plain condition rather than coalesce(): Citus allows no now() inside coalesce or
  // case in an UPDATE (failing_since, when set, is in the past).
  const [hook] = await tx`
    with disable as (
      select ${gone}::boolean
        or (failing_since is not null and
          failing_since <= now() - make_interval(secs => ${disableAfterSeconds}))
        as now_off
      from webhooks where account_id = ${accountId} and id = ${webhookId}
    )
    update webhooks set failing_since = least(failing_since, now()), active = not disable.now_off,
      disabled_by = case when disable.now_off then 'service' end, last_failure_at = now(),
      last_failure_status = ${result.status_code}, last_failure_error = ${result.error}
    from disable
    where account_id = ${accountId} and id = ${webhookId} and active
    returning id, url, active, failing_since`
  if (hook && !hook.active)
    await notifyUsers(tx, accountId, 'webhook.disabled', {
      webhook_id: hook.id,
      url: hook.url,
      reason: gone ? 'gone' : 'failing',
      failing_since: hook.failing_since,
      status_code: result.status_code,
      error: result.error,
    })
}
