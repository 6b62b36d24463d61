import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService } from './helpers/service.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'

const TABLES = ['customers', 'customer_snapshots', 'customer_scores']

const customers = (prefix: string, from: number) =>
  Array.from({ length: 1000 }, (_, i) => ({
    external_id: `${prefix}${from + i}`,
    name: `Customer ${from + i}`,
    attributes: { country: 'US' },
    metrics: [{ date: '2026-01-01', logins: i % 40 }],
  }))

test("a new account's first upload beside a larger account is known to the planner once it is scored", async () => {
  const s = await startTestService({ apiRateLimit: 100_000 })
  try {
    const upload = (
      account: Awaited<ReturnType<typeof scoredAccount>>,
      prefix: string,
      from: number,
    ) => uploadAndWait(account.api, 'customers', customers(prefix, from), { scored: true })
    const big = await scoredAccount(s, 'Big')
    for (const from of [0, 1000, 2000]) await upload(big, 'b', from)
    // Statistics that know the big account alone, as autovacuum leaves them; and no autovacuum
    // from now on, which would otherwise analyze these small tables within its minute.
    await s.sql`analyze`
    for (const table of TABLES)
      await s.sql`alter table ${s.sql(table)} set (autovacuum_enabled = false)`
    const estimate = async (table: string, accountId: number) => {
      const [row] = await s.sql`explain (format json) select from ${s.sql(table)}
          where account_id = ${accountId}`
      return Number(row['QUERY PLAN'][0].Plan['Plan Rows'])
    }
    const fresh = await scoredAccount(s, 'New')
    for (const table of TABLES)
      assert.ok((await estimate(table, fresh.id)) < 10, `${table}: no rows of New yet`)
    await upload(fresh, 'n', 0)
    // 1000 customers, each with one snapshot and one score row; the big account's 3000 are still
    // estimated as such (the table as a whole grew by a third: no reason to analyze for it).
    for (const table of TABLES) {
      const rows = await estimate(table, fresh.id)
      assert.ok(rows >= 500 && rows <= 2000, `${table}: New's 1000 rows estimated as ${rows}`)
    }
  } finally {
    await s.stop()
  }
})
