// npm run bench [names...]: runs the benchmarks (each a bench/<name>.ts exporting a default
// async function(ctx)), prints a table and writes bench/results.json. A run of some benches keeps
// the other benches' rows of the previous results.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { createDatabase, startCluster, type BenchContext, type Row } from './lib.ts'

const names = process.argv.slice(2).length
  ? process.argv.slice(2)
  : readdirSync('bench')
      .filter((f) => f.endsWith('.ts') && !['lib.ts', 'run.ts'].includes(f))
      .map((f) => f.slice(0, -3))
      .sort()

const rows: Row[] = []
const fmt = (n: number | undefined) => (n === undefined ? '' : Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(2))
const line = (r: Row) =>
  [r.bench, r.metric, `${fmt(r.value)} ${r.unit}`, fmt(r.baseline), fmt(r.ratio), r.target ?? '']
    .map((c, i) => c.padEnd([10, 44, 18, 12, 8, 0][i]))
    .join(' ')

// The benches that start the service run the single executable (bench/server.ts): built anew, so
// that they measure this tree's code.
execFileSync(process.execPath, ['build.mjs'], { stdio: 'inherit' })

const cluster = await startCluster()
try {
  process.stdout.write(
    ['bench', 'metric', 'value', 'baseline', 'ratio', 'target']
      .map((c, i) => c.padEnd([10, 44, 18, 12, 8, 0][i]))
      .join(' ') + '\n',
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
    if (typeof bench === 'function') await bench(ctx) // helper modules (server.ts) export none
  }
} finally {
  await cluster.stop()
  const ran = new Set(rows.map((r) => r.bench))
  const kept = existsSync('bench/results.json')
    ? (JSON.parse(readFileSync('bench/results.json', 'utf8')).rows as Row[]).filter((r) => !ran.has(r.bench))
    : []
  writeFileSync(
    'bench/results.json',
    JSON.stringify({ at: new Date().toISOString(), node: process.version, rows: [...kept, ...rows] }, null, 2) + '\n',
  )
}
