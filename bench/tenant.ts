// A new tenant's first day beside a large one. One account holds BIG customers with 12 monthly
// snapshots (1.2 million snapshot rows at 100k), analyzed as autovacuum would have. Three new
// accounts then each upload 1000 customers x 12 snapshots over HTTP (timed from the request to
// scored); the last one changes its scoring model (timed to rescored) and searches. Baselines, in
// the same run: the same uploads by new accounts in an empty database, and the rescoring and search
// of the new account again after a manual ANALYZE, when the planner knows its rows.
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { median, type BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'
import { startServer } from './server.ts'

const BIG = Number(process.env.BENCH_TENANT_CUSTOMERS ?? 100_000)
const NEW = 1000
const TODAY = new Date().toISOString().slice(0, 10)
const day = (n: number) => new Date(Date.parse(TODAY) + n * 86_400_000).toISOString().slice(0, 10)

const customers = (from: number) =>
  Array.from({ length: NEW }, (_, i) => ({
    external_id: `new-${from + i}`,
    name: `New ${from + i}`,
    attributes: { country: ['US', 'DE', 'FR'][i % 3], has_sso: i % 2 === 0, renewal_date: day(i % 300) },
    metrics: Array.from({ length: 12 }, (_, m) => ({
      date: day(-30 * (11 - m)),
      logins: (i + m) % 50,
      seats: 1 + (i % 20),
      tickets: (i * m) % 7,
      nps: (i + m) % 11,
    })),
  }))

const timed = async (f: () => Promise<unknown>) => {
  const started = performance.now()
  await f()
  return (performance.now() - started) / 1000
}

type Server = Awaited<ReturnType<typeof startServer>>

// A new account in the service, with the bench's properties and model and a key.
const tenant = async (server: Server) => {
  const account = await server.admin('POST', '/accounts', { name: `New ${Date.now()}` })
  const A = `/accounts/${account.id}`
  for (const codename of ['logins', 'seats', 'tickets', 'nps']) {
    await server.admin('POST', `${A}/properties`, { entity: 'customer', kind: 'metric', codename, type: 'number' })
  }
  for (const [codename, type] of [
    ['country', 'string'],
    ['has_sso', 'boolean'],
  ]) {
    await server.admin('POST', `${A}/properties`, { entity: 'customer', kind: 'attribute', codename, type })
  }
  await server.admin('PUT', `${A}/scoring`, model(40))
  const { token } = await server.admin('POST', `${A}/keys`, {})
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.base}${path}`, {
      method,
      headers: { 'service-key': token, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
    return res.json()
  }
  const uploadScored = async () => {
    const { upload_id } = await api('POST', '/api/v1/customers', { customers: customers(0) })
    for (;;) {
      const u = await api('GET', `/api/v1/uploads/${upload_id}`)
      if (u.status === 'failed') throw new Error(`upload failed: ${u.error}`)
      if (u.scored_at) return
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  // A model change rescores the whole account; done when no scoring job is left.
  const rescored = async (sql: Sql, logins: number) => {
    await server.admin('PUT', `${A}/scoring`, model(logins))
    for (;;) {
      const [{ pending }] = await sql`
        select count(*)::int as pending from graphile_worker._private_jobs j
          join graphile_worker._private_tasks t on t.id = j.task_id
        where t.identifier = 'score_records'`
      if (pending === 0) return
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  const search = () =>
    api('POST', '/api/v1/customers/search', {
      filters: [
        { propertyName: 'engagementscore', operator: 'GT', value: '0' },
        { propertyName: 'country', operator: 'EQ', value: 'US' },
      ],
      limit: 100,
    })
  const searchMs = async () => {
    await search()
    const runs = []
    for (let i = 0; i < 20; i++) runs.push(await timed(search))
    return median(runs) * 1000
  }
  return { account, uploadScored, rescored, searchMs }
}

// The first upload of a new account, timed for each of three new accounts: one upload is one
// sample of about a second, which this machine's noise moved by half (1.03 against 1.61 s in one run).
const firstUploads = async (server: Server) => {
  const runs = []
  let last: Awaited<ReturnType<typeof tenant>> | undefined
  for (let i = 0; i < 3; i++) {
    last = await tenant(server)
    runs.push(await timed(last.uploadScored))
  }
  return { seconds: median(runs), tenant: last! }
}

export default async (ctx: BenchContext) => {
  // Baseline: the same uploads in an empty database.
  const emptyUrl = await ctx.database()
  const empty = connect(emptyUrl)
  await migrate(empty, emptyUrl)
  await empty`vacuum analyze`
  const small = await startServer(emptyUrl)
  const emptyUpload = (await firstUploads(small)).seconds
  await small.stop()
  await empty.end()

  const url = await ctx.database()
  const sql = connect(url)
  let server: Server | undefined
  try {
    await migrate(sql, url)
    await seed(sql, BIG, 'Big')
    await sql`vacuum analyze`
    const [{ rows }] = await sql`select count(*)::int as rows from customer_snapshots`
    server = await startServer(url)
    const { seconds: upload, tenant: t } = await firstUploads(server)
    // A rescoring of 1000 customers takes a fifth of a second, so one run is mostly the worker's pickup
    // and the polling: the median of five, each model different from the one before.
    const rescores = async (logins: number[]) => {
      const runs = []
      for (const l of logins) runs.push(await timed(() => t.rescored(sql, l)))
      return median(runs)
    }
    const rescore = await rescores([30, 35, 30, 35, 30])
    const search = await t.searchMs()
    await sql`analyze`
    const rescoreAnalyzed = await rescores([20, 25, 20, 25, 20])
    const searchAnalyzed = await t.searchMs()
    ctx.report({
      bench: 'tenant',
      metric: `new account: upload ${NEW}x12 to scored (median of 3 accounts), beside ${rows} snapshot rows`,
      value: upload,
      unit: 's',
      baseline: emptyUpload,
      ratio: upload / emptyUpload,
      target: '<= 1.5 (same upload, empty database)',
    })
    ctx.report({
      bench: 'tenant',
      metric: 'new account: model change to rescored (median of 5)',
      value: rescore,
      unit: 's',
      baseline: rescoreAnalyzed,
      ratio: rescore / rescoreAnalyzed,
      target: '<= 1.5 (after ANALYZE)',
    })
    ctx.report({
      bench: 'tenant',
      metric: 'new account: search p50',
      value: search,
      unit: 'ms',
      baseline: searchAnalyzed,
      ratio: search / searchAnalyzed,
      target: '<= 1.5 (after ANALYZE)',
    })
  } finally {
    await server?.stop()
    await sql.end()
  }
}
