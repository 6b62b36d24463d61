// npm run bench [names...]: runs the benchmarks (each a bench/<name>.ts exporting a default
// async function(ctx)), prints a table and writes bench/results.json. A run of some benches keeps
// the other benches' rows of the previous results. With no name, every bench runs, one after the
// other in this process tree, at the sizes of WHOLE_RUN (each still overridable by its
// variable), so that the whole run stays bounded; a bench that fails is recorded as failed
// and the run goes on.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { createDatabase, startCluster, type BenchContext, type Row } from './lib.ts'

// The whole run's sizes: each bench's variable, where it is not set already. Figures at these sizes
// are for comparing runs with each other; a bar measured at a bench's own size needs its own run.
const WHOLE_RUN: Record<string, string> = {
  BENCH_AGGREGATE_ROWS: '100000',
  BENCH_BACKUP_CUSTOMERS: '10000',
  BENCH_CHURN_SIZES: '10000',
  BENCH_CITUS_SECONDS: '10',
  BENCH_ERASURE_CUSTOMERS: '10000',
  BENCH_INGEST_CUSTOMERS: '20000',
  BENCH_SCORING_CUSTOMERS: '20000',
  BENCH_SEARCH_ROWS: '100000',
  BENCH_SEARCH_IN_ROWS: '10000',
  BENCH_SEGMENT_SECONDS: '5',
  BENCH_SOAK_SECONDS: '30',
  BENCH_TENANT_CUSTOMERS: '30000',
  BENCH_TRACKING_SECONDS: '8',
  BENCH_WEBHOOK_CUSTOMERS: '10000',
  BENCH_WEEK_CUSTOMERS: '20000',
}

const given = process.argv.slice(2)
const whole = given.length === 0
const names = whole
  ? readdirSync('bench')
      .filter((f) => f.endsWith('.ts') && !f.startsWith('.') && !['lib.ts', 'run.ts'].includes(f))
      .map((f) => f.slice(0, -3))
      .sort()
  : given
if (whole) for (const [name, value] of Object.entries(WHOLE_RUN)) process.env[name] ??= value

// Read before anything of the run's own starts: a 1-minute load average of half the cores or more
// means other work shares the machine, and every figure of the run is then labelled "loaded".
const cores = availableParallelism()
const load = loadavg()[0]
const machine = load >= cores * 0.5 ? 'loaded' : 'quiet'

const rows: Row[] = []
const fmt = (n: number | undefined) =>
  n === undefined || Number.isNaN(n) ? '' : Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(2)
const WIDTHS = [10, 52, 18, 12, 8, 0]
const columns = (cells: string[]) => cells.map((c, i) => c.padEnd(WIDTHS[i])).join(' ')
const line = (r: Row) =>
  columns([
    r.bench,
    r.metric,
    `${fmt(r.value)} ${r.unit}`,
    fmt(r.baseline),
    fmt(r.ratio),
    r.target ?? '',
  ])

// Whether a row meets its bar, when the bar is a plain comparison ("<= 1.5", ">= 0.8", "0"): of the
// ratio where the row has one, else of the value; of the value too where the bar names the row's
// unit ("< 1 s": week's requests, whose ratio is against a search).
const verdict = (r: Row) => {
  const bar = /^(>=|<=|<|>)?\s*(-?[\d.]+)(\s|$)/.exec(r.target ?? '')
  if (!bar) return ''
  const unit = (r.target ?? '').slice(bar[0].length).split(' ')[0]
  const x = r.ratio === undefined || unit === r.unit ? r.value : r.ratio
  const limit = Number(bar[2])
  const met =
    { '>=': x >= limit, '<=': x <= limit, '<': x < limit, '>': x > limit }[bar[1]] ?? x === limit
  return met ? 'met' : 'not met'
}

// The benches that start the service run the single executable (bench/server.ts): built anew, so
// that they measure this tree's code.
execFileSync(process.execPath, ['build.mjs'], { stdio: 'inherit' })

// The previous results, read before this run writes its own after each bench (so that a run
// stopped midway keeps what it measured).
const previous: Row[] = existsSync('bench/results.json')
  ? JSON.parse(readFileSync('bench/results.json', 'utf8')).rows
  : []
const began = performance.now()
const timings: { bench: string; seconds: number; failed?: string }[] = []
function save() {
  const ran = new Set([...rows.map((r) => r.bench), ...timings.map((t) => t.bench)])
  writeFileSync(
    'bench/results.json',
    JSON.stringify(
      {
        at: new Date().toISOString(),
        node: process.version,
        machine,
        loadAverage: load,
        cores,
        seconds: (performance.now() - began) / 1000,
        sizes: Object.fromEntries(Object.keys(WHOLE_RUN).map((k) => [k, process.env[k]])),
        benches: timings,
        rows: [
          ...previous.filter((r) => !ran.has(r.bench)),
          ...rows.map((r) => ({ ...r, verdict: verdict(r) || undefined, machine })),
        ],
      },
      null,
      2,
    ) + '\n',
  )
}

const cluster = await startCluster()
try {
  process.stdout.write(
    `machine ${machine}: load average ${load.toFixed(2)} on ${cores} cores at the start\n` +
      columns(['bench', 'metric', 'value', 'baseline', 'ratio', 'target']) +
      '\n',
  )
  const ctx: BenchContext = {
    database: () => createDatabase(cluster.url),
    report: (row) => {
      rows.push(row)
      process.stdout.write(line(row) + '\n')
    },
  }
  for (const name of names) {
    const { default: bench } = await import(`./${name}.ts`)
    if (typeof bench !== 'function') continue // helper modules (server.ts) export none
    const started = performance.now()
    try {
      await bench(ctx)
      timings.push({ bench: name, seconds: (performance.now() - started) / 1000 })
      process.stdout.write(`bench ${name}: ${timings.at(-1)!.seconds.toFixed(0)} s\n`)
    } catch (err) {
      // One bench's failure is its row; the others still run (a named bench's failure
      // ends the run).
      if (!whole) throw err
      const failed = String((err as Error)?.message ?? err).split('\n')[0]
      process.stderr.write(`bench ${name} failed: ${(err as Error)?.stack ?? err}\n`)
      timings.push({ bench: name, seconds: (performance.now() - started) / 1000, failed })
    }
    save()
  }
} finally {
  await cluster.stop()
  const barred = rows.filter((r) => r.target !== undefined || r.ratio !== undefined)
  process.stdout.write(
    `\n${machine} (load average ${load.toFixed(2)} on ${cores} cores at the start), ` +
      `${((performance.now() - began) / 1000).toFixed(0)} s in all\n` +
      columns(['bench', 'figure', 'value', 'baseline', 'ratio', 'bar']) +
      '\n' +
      barred.map((r) => `${line(r)} ${verdict(r)}`).join('\n') +
      '\n' +
      timings
        .map(
          (t) => `${t.bench}: ${t.seconds.toFixed(0)} s${t.failed ? `, FAILED: ${t.failed}` : ''}`,
        )
        .join('\n') +
      '\n',
  )
  save()
}
