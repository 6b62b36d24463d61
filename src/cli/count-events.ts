import { parseArgs } from 'node:util'
import { accountExists } from '../accounts/accounts.ts'
import { accountsWithNumberMetrics } from '../catalog/properties.ts'
import { countAccountEvents } from '../tracking/tracker/counts.ts'
import type { Sql } from '../db/client.ts'

export const countEventsUsage = `service count-events [--account ID]

Counts tracked events into today's metric snapshots now, for one account or all of them (the
worker does this daily at 01:00 UTC), and enqueues the scoring of the records it changed.
Runs directly against the database, not through the job queue. Prints one line per account.
`

export const runCountEvents = async (sql: Sql, args: string[]): Promise<number> => {
  const { values } = parseArgs({ args, options: { account: { type: 'string' } }, strict: false })
  // Without a value (--account alone, or before another option) it is no account id.
  const given = values.account
  const account =
    given === undefined ? undefined : typeof given === 'string' ? Number(given) : Number.NaN
  if (account !== undefined && !(Number.isSafeInteger(account) && account > 0)) {
    process.stderr.write(`--account needs an account id.\n\n${countEventsUsage}`)
    return 2
  }
  if (account !== undefined && !(await accountExists(sql, account))) {
    process.stderr.write(`Account ${account} does not exist.\n`)
    return 1
  }
  for (const id of account === undefined ? await accountsWithNumberMetrics(sql) : [account]) {
    process.stdout.write(JSON.stringify(await countAccountEvents(sql, id)) + '\n')
  }
  return 0
}
