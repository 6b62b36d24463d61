// Where one upload's cost goes (issue 49): BENCH_SPLIT_CUSTOMERS customers (20,000) with 12 dated
// snapshots each, bench/ingest's rows, sent as uploads of MAX_CUSTOMERS, each step run in this
// process the way the request and the worker run it, one at a time, and timed on its own:
// - parsing: the body's bytes decoded and JSON.parse'd (http/request.ts readJson);
// - validation: the route's valibot schema, then the values against the account's definitions
//   (values.ts checkValues);
// - staging write: receiveUpload's statements (the account's state, the upload row with its items
//   and its job), its checkValues taken out;
// - merge: processUpload in its transaction (staging tables, records, snapshots), its enqueueing
//   statements taken out by pg_stat_statements;
// - scoring enqueue: the statements processUpload runs to add jobs, webhook events and
//   notifications (pg_stat_statements);
// - scoring run: scoreRecords of each upload's records alone, as its score_uploads job runs it.
// Each is reported in µs per customer and per snapshot, as wall time and as CPU time (this process
// and the cluster's), with the load average at the start. The bench runs its own cluster, with
// pg_stat_statements loaded; with BENCH_SPLIT_PLANS=<file>, an upload more (new customers, not
// counted) is merged under auto_explain and its plans (ANALYZE, BUFFERS) are written to the file.
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import postgres from 'postgres'
import { loadConfig } from '../src/config.ts'
import type { App } from '../src/context.ts'
import { connect } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { readJson } from '../src/http/request.ts'
import { catalogOf, type PropertyDef } from '../src/property.ts'
import type { Req } from '../src/route.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import { processUpload } from '../src/uploads/process.ts'
import { receiveUpload } from '../src/uploads/receive.ts'
import { CustomersBody, MAX_CUSTOMERS } from '../src/uploads/schemas.ts'
import { parse } from '../src/validate.ts'
import { checkValues } from '../src/values.ts'
import { createDatabase, startThrowawayCluster } from '../test/helpers/cluster.ts'
import { ATTRIBUTES, customer, METRICS, MONTHS } from './ingest.ts'
import { type BenchContext, clusterCpuNs, parentOf } from './lib.ts'
import { seedAccount } from './seed.ts'

const CUSTOMERS = Number(process.env.BENCH_SPLIT_CUSTOMERS ?? 20_000)
// Statements that enqueue what an upload sets off, by their text.
const ENQUEUE = /add_jobs|add_job\(|webhook_outbox|notifications|graphile_worker/

// A step's wall time and CPU time (this process's threads and the cluster's processes), in ms.
// The CPU is the figure a loaded machine moves least: the scheduler delays a step, it does not
// make it do more work.
const measured =
  (postmaster: number) =>
  async <T>(run: () => T | Promise<T>): Promise<[T, number, number]> => {
    const cluster = clusterCpuNs(postmaster)
    const node = process.cpuUsage()
    const started = performance.now()
    const value = await run()
    const ms = performance.now() - started
    const { user, system } = process.cpuUsage(node)
    return [value, ms, (user + system) / 1000 + (clusterCpuNs(postmaster) - cluster) / 1e6]
  }

const setUp = async (sql: ReturnType<typeof connect>) => {
  const accountId = await seedAccount(sql, 'Split', ATTRIBUTES, METRICS)
  const model = { customer: { engagement: [{ codename: 'logins', weight: 1, bad: 0, good: 40 }] } }
  await sql`insert into scoring_models (account_id, model)
    values (${accountId}, ${sql.json(model)})`
  return accountId
}

const body = (from: number, n: number) =>
  Buffer.from(
    JSON.stringify({ customers: Array.from({ length: n }, (_, j) => customer(from + j)) }),
  )

const statements = (sql: postgres.Sql) => sql`
  select query, calls::int, total_exec_time::float as ms from pg_stat_statements
  where dbid = (select oid from pg_database where datname = current_database())`

export default async (ctx: BenchContext) => {
  const load = loadavg()[0]
  const cluster = await startThrowawayCluster('service-split-', [
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    'pg_stat_statements.track=all',
  ])
  const { url } = await createDatabase(cluster.url, 'split')
  const sql = connect(url)
  const stats = postgres(url, { max: 1, onnotice: () => {} })
  try {
    await migrate(sql, url)
    await stats`create extension if not exists pg_stat_statements`
    const accountId = await setUp(sql)
    const app: App = {
      sql,
      heavy: sql,
      admin: sql,
      config: loadConfig({}),
      log: () => {},
      keys: undefined as never,
    }
    const [{ defs }] = await sql`
      select coalesce(json_agg(json_build_object('codename', codename, 'kind', kind, 'type', type)),
        '[]') as defs
      from property_defs where account_id = ${accountId}`
    const catalog = catalogOf(defs as PropertyDef[])
    const [{ pid }] = await stats`select pg_backend_pid() as pid`
    const elapsed = measured(parentOf(pid))
    const ms = { parsing: 0, validation: 0, checkValues: 0, receive: 0, process: 0, scoring: 0 }
    const cpu = { ...ms }
    // processUpload's and the scoring run's statements, each summed over the uploads.
    const byStatement = new Map<string, { calls: number; ms: number }>()
    const scoringStatements = new Map<string, { calls: number; ms: number }>()
    const collect = async (into: typeof byStatement) => {
      for (const r of await statements(stats)) {
        const seen = into.get(r.query) ?? { calls: 0, ms: 0 }
        into.set(r.query, { calls: seen.calls + r.calls, ms: seen.ms + r.ms })
      }
      await stats`select pg_stat_statements_reset()`
    }
    for (let from = 0; from < CUSTOMERS; from += MAX_CUSTOMERS) {
      const bytes = body(from, Math.min(MAX_CUSTOMERS, CUSTOMERS - from))
      const req = { headers: {}, body: bytes } as unknown as Req
      const [json, parsing, parsingCpu] = await elapsed(() => readJson(req))
      const [input, validation, validationCpu] = await elapsed(() => parse(CustomersBody, json))
      const [, checking, checkingCpu] = await elapsed(() =>
        checkValues(input.customers, catalog, (i) => `/customers/${i}`),
      )
      const [received, receiving, receivingCpu] = await elapsed(() =>
        receiveUpload(app, accountId, 'customers', input.customers),
      )
      await stats`select pg_stat_statements_reset()`
      const [merged, processing, processingCpu] = await elapsed(() =>
        sql.begin((tx) => processUpload(tx, accountId, received.upload_id)),
      )
      await collect(byStatement)
      const [, scoring, scoringCpu] = await elapsed(() =>
        scoreRecords(sql, { account_id: accountId, entity: 'customer', ids: merged!.ids }),
      )
      await collect(scoringStatements)
      const add = (into: typeof ms, step: typeof ms) => {
        for (const k of Object.keys(into) as (keyof typeof ms)[]) into[k] += step[k]
      }
      add(ms, {
        parsing,
        validation: validation + checking,
        checkValues: checking,
        receive: receiving,
        process: processing,
        scoring,
      })
      add(cpu, {
        parsing: parsingCpu,
        validation: validationCpu + checkingCpu,
        checkValues: checkingCpu,
        receive: receivingCpu,
        process: processingCpu,
        scoring: scoringCpu,
      })
    }
    // The share of processUpload's database time that is enqueueing.
    const all = [...byStatement].map(([query, r]) => ({ query, ...r }))
    const dbTotal = all.reduce((s, r) => s + r.ms, 0)
    const enqueue = all.filter((r) => ENQUEUE.test(r.query)).reduce((s, r) => s + r.ms, 0)
    const enqueueShare = dbTotal ? enqueue / dbTotal : 0
    process.stderr.write(
      `split: processUpload ${ms.process.toFixed(0)} ms, ${dbTotal.toFixed(0)} ms in statements\n`,
    )
    const top = (label: string, rows: { query: string; calls: number; ms: number }[]) => {
      for (const r of rows.sort((a, b) => b.ms - a.ms).slice(0, 15))
        process.stderr.write(
          `split: ${label} ${r.ms.toFixed(1)} ms x${r.calls} ${r.query.replace(/\s+/g, ' ').slice(0, 150)}\n`,
        )
    }
    top('merge', all)
    top(
      'scoring',
      [...scoringStatements].map(([query, r]) => ({ query, ...r })),
    )
    const snapshots = CUSTOMERS * MONTHS.length
    const phases = (t: typeof ms): [string, number][] => [
      ['parsing (UTF-8 decode, JSON.parse)', t.parsing],
      ['validation (valibot schema, checkValues)', t.validation],
      ['staging write (account state, upload row + job)', t.receive - t.checkValues],
      ['merge (processUpload, enqueueing taken out)', t.process * (1 - enqueueShare)],
      ['scoring enqueue (jobs, events, notifications)', t.process * enqueueShare],
      ['scoring run (scoreRecords)', t.scoring],
    ]
    for (const [kind, t] of [
      ['wall', ms],
      ['CPU', cpu],
    ] as const) {
      const total = phases(t).reduce((s, [, x]) => s + x, 0)
      for (const [name, x] of phases(t))
        ctx.report({
          bench: 'split',
          metric: `${kind}: ${name}: µs/customer (${((1000 * x) / snapshots).toFixed(2)} µs/snapshot)`,
          value: (1000 * x) / CUSTOMERS,
          unit: 'µs',
          baseline: (1000 * total) / CUSTOMERS,
          ratio: x / total,
        })
      ctx.report({
        bench: 'split',
        metric: `${kind}: all of it, ${CUSTOMERS} customers: µs/customer`,
        value: (1000 * total) / CUSTOMERS,
        unit: 'µs',
      })
    }
    ctx.report({
      bench: 'split',
      metric: 'load average (1 min) at the start',
      value: load,
      unit: '',
    })
    if (process.env.BENCH_SPLIT_PLANS) {
      const plans: string[] = []
      const explained = postgres(url, { max: 1, onnotice: (n) => plans.push(n.message) })
      const input = parse(CustomersBody, JSON.parse(body(CUSTOMERS, MAX_CUSTOMERS).toString()))
      const received = await receiveUpload(app, accountId, 'customers', input.customers)
      await explained.begin(async (tx) => {
        await tx`load 'auto_explain'`
        await tx`set local client_min_messages = log`
        for (const [name, value] of Object.entries({
          log_min_duration: '0',
          log_analyze: 'on',
          log_buffers: 'on',
          log_nested_statements: 'on',
        }))
          await tx.unsafe(`set local auto_explain.${name} = ${value}`)
        await processUpload(tx as never, accountId, received.upload_id)
      })
      await explained.end()
      writeFileSync(process.env.BENCH_SPLIT_PLANS, plans.join('\n\n') + '\n')
    }
  } finally {
    await stats.end()
    await sql.end()
    await cluster.stop()
  }
}
