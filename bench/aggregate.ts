// Aggregates at scale: bench/search's data (BENCH_AGGREGATE_ROWS customers in the main account, a
// tenth of that in a second one interleaved with it), and each shape measured through HTTP against
// hand-written SQL for the same answer, run directly through postgres.js, alternating in the same
// run at 8 concurrent clients. The ratio is service / direct. Histograms are not a shape: their
// second pass would make a run of it take minutes on a 2-core machine.
import { connect } from '../src/db/client.ts'
import { createKey } from '../src/accounts/keys.ts'
import { type BenchContext, unthrottledService } from './lib.ts'
import { closedLoop, CONCURRENCY, seed, sideBySide } from './search.ts'

const ROWS = Number(process.env.BENCH_AGGREGATE_ROWS ?? 1_000_000)
const SECONDS = Number(process.env.BENCH_AGGREGATE_SECONDS ?? 4)

interface Shape {
  name: string
  body: Record<string, unknown>
  // The same answer, in SQL as one would write it by hand; $1 is the account.
  sql: string
  // The service's answer and the direct rows, as the same comparable value.
  answers: (body: any) => unknown
  direct: (rows: any[]) => unknown
  target?: string
}

const ACTIVE = 'r.account_id = $1 and not r.is_churned'
const SCORES =
  'left join customer_scores h on h.account_id = r.account_id and h.customer_id = r.service_id'
const THREE_COUNTRIES = `(r.attributes @> '{"country":"DE"}' or r.attributes @> '{"country":"FR"}'
  or r.attributes @> '{"country":"NL"}')`
// Cells of 20 points from -100; a score of 100 (cell 10) belongs to the last.
const grid = (rows: { x: number | null; y: number | null; count: number }[]) => {
  const counts = Array.from({ length: 10 }, () => new Array<number>(10).fill(0))
  for (const r of rows)
    if (r.x !== null && r.y !== null) counts[Math.min(r.x, 9)][Math.min(r.y, 9)] += r.count
  return { count: rows.reduce((sum, r) => sum + r.count, 0), counts }
}

const SHAPES: Shape[] = [
  {
    name: 'exact count, all active',
    body: {},
    sql: `select count(*) from customers r where ${ACTIVE}`,
    answers: (b) => b.count,
    direct: ([row]) => row.count,
    target: '<= 1.5',
  },
  {
    name: 'exact count, country IN (DE, FR, NL)',
    body: { filters: [{ propertyName: 'country', operator: 'IN', values: ['DE', 'FR', 'NL'] }] },
    sql: `select count(*) from customers r where ${ACTIVE} and ${THREE_COUNTRIES}`,
    answers: (b) => b.count,
    direct: ([row]) => row.count,
    target: '<= 1.5',
  },
  {
    name: 'matrix aggregate (10x10 grid), all active',
    body: { matrix: 'grid' },
    sql: `select (h.engagementscore + 100) / 20 as x, (h.fitscore + 100) / 20 as y,
      count(*)::int as count from customers r ${SCORES} where ${ACTIVE} group by 1, 2`,
    answers: (b) => ({ count: b.count, counts: b.grid.counts }),
    direct: grid,
    target: '<= 1.5',
  },
  {
    name: 'matrix aggregate (10x10 grid), country IN (DE, FR, NL)',
    body: {
      filters: [{ propertyName: 'country', operator: 'IN', values: ['DE', 'FR', 'NL'] }],
      matrix: 'grid',
    },
    sql: `select (h.engagementscore + 100) / 20 as x, (h.fitscore + 100) / 20 as y,
      count(*)::int as count from customers r ${SCORES} where ${ACTIVE} and ${THREE_COUNTRIES} group by 1, 2`,
    answers: (b) => ({ count: b.count, counts: b.grid.counts }),
    direct: grid,
    target: '<= 1.5',
  },
  {
    name: 'matrix points (10,000 sampled), all active',
    body: { matrix: 'points' },
    sql: `select r.external_id as id, r.name, h.engagementscore, h.fitscore, h.churn_risk
      from customers r join customer_scores h on h.account_id = r.account_id and h.customer_id = r.service_id
      where ${ACTIVE} and h.engagementscore is not null and h.fitscore is not null
      order by md5(r.external_id) collate "C", r.external_id limit 10000`,
    answers: (b) => b.points.items.map((p: { id: string }) => p.id),
    direct: (rows) => rows.map((r) => r.id),
  },
]

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const started = performance.now()
  const { main } = await seed(url, ROWS)
  ctx.report({
    bench: 'aggregate',
    metric: `seed ${ROWS} + ${Math.ceil(ROWS / 10)} customers`,
    value: (performance.now() - started) / 1000,
    unit: 's',
  })
  const service = await unthrottledService(url)
  const direct = connect(url, { max: CONCURRENCY })
  try {
    const { token } = await createKey(service.app.sql, main, { scopes: ['search'] } as never)
    const at = `http://127.0.0.1:${service.port}/api/v1/customers/aggregate`
    for (const shape of SHAPES) {
      const body = JSON.stringify(shape.body)
      const runDirect = () => direct.unsafe(shape.sql, [main])
      const post = () =>
        fetch(at, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'service-key': token },
          body,
        })
      const res = await post()
      if (res.status !== 200) throw new Error(`${shape.name}: ${res.status} ${await res.text()}`)
      const answer = JSON.stringify(shape.answers(await res.json()))
      if (answer !== JSON.stringify(shape.direct(await runDirect())))
        throw new Error(`${shape.name}: the service's answer and the direct SQL's differ`)
      // fetch in bench/search's closed loop, not autocannon: a slice shorter than one answer would
      // end autocannon's requests unanswered, where the loop waits for them as for the
      // direct side's.
      const runHttp = () => post().then((r) => r.arrayBuffer())
      const loads = [closedLoop(runDirect), closedLoop(runHttp)]
      for (const load of loads) await load(0.5, [])
      const [sqlRun, httpRun] = await sideBySide(loads, SECONDS)
      const report = (
        metric: string,
        value: number,
        baseline: number,
        unit: string,
        target?: string,
      ) =>
        ctx.report({
          bench: 'aggregate',
          metric,
          value,
          unit,
          baseline,
          ratio: value / baseline,
          target,
        })
      report(`${shape.name} p50`, httpRun.p50, sqlRun.p50, 'ms', shape.target)
      report(`${shape.name} p99`, httpRun.p99, sqlRun.p99, 'ms')
      report(`${shape.name} req/s`, httpRun.rps, sqlRun.rps, 'req/s')
    }
  } finally {
    await direct.end()
    await service.stop()
  }
}
