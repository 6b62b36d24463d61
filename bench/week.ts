// The "This week" report (GET /api/v1/insights/week) over an account of 100,000 scored customers with
// 12 monthly snapshots each (seeded with COPY, bench/scoring.ts), 1% of them churned three days ago
// and half of those reactivated since: the console's home view asks for it, and its budget is the
// view rendered in under 1 s. Both periods kept (week_reports) and right after a change of a customer
// (computed anew). Baseline, in the same run: a plain search request for a page of 100 customers, and
// the same search with an exact count.
import { connect } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { median, type BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'
import { startServer } from './server.ts'

const CUSTOMERS = Number(process.env.BENCH_WEEK_CUSTOMERS ?? 100_000)
const RUNS = 7

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const sql = connect(url)
  await migrate(sql, url)
  const server = await startServer(url)
  try {
    const accountId = await seed(sql, CUSTOMERS, 'Week')
    await sql`insert into scoring_models (account_id, model) values (${accountId}, ${sql.json(model(40))})`
    await scoreRecords(sql, { account_id: accountId, entity: 'customer' })
    await sql`update customers set is_churned = true, churned_date = current_date - 3, churn_reason = 'manual'
      where account_id = ${accountId} and service_id % 100 = 0`
    await sql`update customers set is_churned = false, churned_date = null, churn_reason = null
      where account_id = ${accountId} and service_id % 200 = 0`
    await sql`vacuum analyze`
    const { token } = await server.admin('POST', `/accounts/${accountId}/keys`, { scopes: ['search'] })
    const timed = async (path: string, body?: unknown) => {
      const started = performance.now()
      const res = await fetch(`${server.base}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { 'service-key': token, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
      await res.json()
      return (performance.now() - started) / 1000
    }
    // A change of one customer row, untimed, before a report: the report is computed anew (the first
    // two requests of the next run find it kept).
    const change = () => sql`update customers set name = name where account_id = ${accountId} and service_id = 1`
    const requests: [name: string, path: string, body?: unknown, before?: () => Promise<unknown>][] = [
      ['GET /api/v1/insights/week (7 days)', '/api/v1/insights/week'],
      ['GET /api/v1/insights/week?days=30', '/api/v1/insights/week?days=30'],
      ['search, a page of 100 (baseline)', '/api/v1/customers/search', { limit: 100 }],
      ['search, a page of 100 with count "exact"', '/api/v1/customers/search', { limit: 100, count: 'exact' }],
      ['GET /api/v1/insights/week, a customer changed', '/api/v1/insights/week', undefined, change],
      ['GET /api/v1/insights/week?days=30, a customer changed', '/api/v1/insights/week?days=30'],
    ]
    const times = new Map(requests.map(([name]) => [name, [] as number[]]))
    for (const [, path, body] of requests) await timed(path, body)
    // Interleaved, so that every request meets the same state of the machine.
    for (let run = 0; run < RUNS; run++)
      for (const [name, path, body, before] of requests) {
        await before?.()
        times.get(name)!.push(await timed(path, body))
      }
    const baseline = median(times.get(requests[2][0])!)
    for (const [name] of requests) {
      const value = median(times.get(name)!)
      ctx.report({
        bench: 'week',
        metric: `${name}, ${CUSTOMERS} customers`,
        value,
        unit: 's',
        baseline,
        ratio: value / baseline,
        target: name.startsWith('GET') ? '< 1 s (issue 34)' : undefined,
      })
    }
  } finally {
    await server.stop()
    await sql.end()
  }
}
