// A backup and a restore (src/backups/) of an account of 100,000 customers with 12 monthly
// snapshots each (bench/scoring.ts's seed, loaded with COPY and then scored), against the
// database's size on disk (pg_database_size) and a plain COPY of every table to nowhere
// in the same run.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { backup, checkBackup, restore } from '../src/backups/dump.ts'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { scoreRecords } from '../src/scoring/batch.ts'
import type { BenchContext } from './lib.ts'
import { model, seed } from './scoring.ts'

const CUSTOMERS = Number(process.env.BENCH_BACKUP_CUSTOMERS ?? 100_000)
const MB = 1e6

const timed = async <T>(run: () => Promise<T>) => {
  const started = performance.now()
  const result = await run()
  return { seconds: (performance.now() - started) / 1000, result }
}

const databaseSize = async (sql: Sql) =>
  Number((await sql`select pg_database_size(current_database())::float8 as n`)[0].n)

// What COPY alone costs: every table the backup holds, read and thrown away.
const copyToNowhere = async (sql: Sql) => {
  const tables = await sql<{ name: string }[]>`
    select c.oid::regclass::text as name from pg_class c
      join pg_namespace n on n.oid = c.relnamespace
    where n.nspname in (current_schema(), 'graphile_worker') and c.relkind = 'r'
      and c.relpersistence = 'p'`
  for (const { name } of tables) {
    const source = await sql.unsafe(`copy ${name} to stdout`).readable()
    await pipeline(source, new Writable({ write: (_chunk, _enc, done) => done() }))
  }
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const sql = connect(url, { max: 4 })
  const dir = mkdtempSync(join(tmpdir(), 'service-bench-backup-'))
  try {
    await migrate(sql, url)
    const account = await seed(sql, CUSTOMERS)
    await sql`insert into scoring_models (account_id, model)
      values (${account}, ${sql.json(model(40))})
      on conflict (account_id) do update set model = excluded.model`
    await scoreRecords(sql, { account_id: account, entity: 'customer' })
    await sql`vacuum analyze`
    const [{ snapshots }] = await sql`select count(*)::int as snapshots from customer_snapshots`
    const onDisk = await databaseSize(sql)
    const raw = await timed(() => copyToNowhere(sql))
    const made = await timed(() => backup(sql, join(dir, 'bench.gz')))
    const target = await ctx.database()
    const restoreSql = connect(target, { max: 1 })
    const restored = await timed(() => restore(restoreSql, target, made.result.file))
    // The restore's first pass alone: the file read through, nothing written.
    const checked = await timed(() => checkBackup(made.result.file))
    const [{ n }] = await restoreSql`select count(*)::int as n from customer_snapshots`
    if (n !== snapshots) throw new Error(`restored ${n} snapshots of ${snapshots}`)
    const restoredSize = await databaseSize(restoreSql)
    await restoreSql.end()
    const what = `${CUSTOMERS} customers, ${snapshots} snapshots`
    ctx.report({
      bench: 'backup',
      metric: `database size on disk (${what})`,
      value: onDisk / MB,
      unit: 'MB',
    })
    ctx.report({
      bench: 'backup',
      metric: 'backup file size',
      value: made.result.bytes / MB,
      unit: 'MB',
      baseline: onDisk / MB,
      ratio: made.result.bytes / onDisk,
    })
    ctx.report({
      bench: 'backup',
      metric: 'COPY of every table to nowhere',
      value: raw.seconds,
      unit: 's',
    })
    ctx.report({
      bench: 'backup',
      metric: `backup (${made.result.rows} rows)`,
      value: made.seconds,
      unit: 's',
      baseline: raw.seconds,
      ratio: made.seconds / raw.seconds,
    })
    ctx.report({
      bench: 'backup',
      metric: 'restore into an empty database',
      value: restored.seconds,
      unit: 's',
      baseline: made.seconds,
      ratio: restored.seconds / made.seconds,
    })
    ctx.report({
      bench: 'backup',
      metric: "restore's check of the file (its first pass, part of the restore's time)",
      value: checked.seconds,
      unit: 's',
      baseline: restored.seconds,
      ratio: checked.seconds / restored.seconds,
    })
    ctx.report({
      bench: 'backup',
      metric: 'restored database size on disk',
      value: restoredSize / MB,
      unit: 'MB',
      baseline: onDisk / MB,
      ratio: restoredSize / onDisk,
    })
  } finally {
    rmSync(dir, { recursive: true, force: true })
    await sql.end()
  }
}
