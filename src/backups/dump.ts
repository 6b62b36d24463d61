import { once } from 'node:events'
import { createReadStream, createWriteStream, renameSync, rmSync, statSync } from 'node:fs'
import type { Readable, Writable } from 'node:stream'
import { finished } from 'node:stream/promises'
import { createGunzip, createGzip } from 'node:zlib'
import type { Sql, Tx } from '../db/client.ts'
import { migrate, migrations } from '../db/migrate.ts'
import { setLocal } from '../db/planner.ts'

// A backup is every logged table of the service's schema and graphile-worker's, exported in one
// repeatable-read snapshot with COPY, in one gzip file (docs/operations.md, "Backups"):
//   line 1   the header, JSON: format, version, the migrations applied, the tables in restore order
//            with their columns, the sequences' values
//   then     each table's rows in COPY's text format, one line a row, ended by a line `\.`
//   last     the trailer, JSON: each table's row count, which also proves the file complete.
// A restore creates the schema with the migrations named in the header, then copies the rows back.
const FORMAT = 'customer-data-service backup'
const VERSION = 1
const WORKER_SCHEMA = 'graphile_worker'
// Made again by the migrations, with the rows the header names: the lists of applied migrations.
const SKIPPED = new Set(['schema_migrations', `${WORKER_SCHEMA}.migrations`])

interface Table {
  // Schema-qualified unless on the search path (the service's own schema; graphile_worker's is not).
  name: string
  columns: string[]
  // A partitioned table is copied through a query; a plain one directly.
  partitioned: boolean
  // The planner's estimate, for progress only.
  estimate: number
}
interface Header {
  format: string
  version: number
  created_at: string
  server_version: string
  migrations: string[]
  worker_migration: number
  tables: Omit<Table, 'estimate'>[]
  sequences: { name: string; last_value: number; is_called: boolean }[]
}
interface Trailer {
  rows: Record<string, number>
}

// Work done of the total: rows of the planner's estimate (a backup), bytes of the file (a restore).
export type Progress = (done: number, total: number, table: string) => void
interface Summary {
  file: string
  bytes: number
  rows: number
  tables: number
  ms: number
}

// Table and sequence names come as regclass prints them, quoted where they need it; columns are quoted here.
const columnList = (columns: string[]) => columns.map((c) => `"${c.replaceAll('"', '""')}"`).join(', ')

// The tables in an order where each comes after those its foreign keys reference, so that a restore
// can check the keys as it copies; unlogged tables (rate-limit windows, worker heartbeats) are
// the running processes' state and are left out.
const listTables = async (tx: Tx): Promise<Table[]> => {
  const rows = await tx<{ name: string; columns: string[]; partitioned: boolean; estimate: number; refs: string[] }[]>`
    select c.oid::regclass::text as name,
      array(select a.attname from pg_attribute a where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        and a.attgenerated = '' order by a.attnum)::text[] as columns,
      c.relkind = 'p' as partitioned, greatest(c.reltuples, 0)::bigint as estimate,
      array(select distinct f.confrelid::regclass::text from pg_constraint f
        where f.conrelid = c.oid and f.contype = 'f' and f.confrelid <> c.oid)::text[] as refs
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname in (current_schema(), ${WORKER_SCHEMA}) and c.relkind in ('r', 'p') and not c.relispartition
      and c.relpersistence = 'p'
    order by 1`
  const kept = rows.filter((r) => !SKIPPED.has(r.name))
  const names = new Set(kept.map((r) => r.name))
  const placed = new Set<string>()
  const ordered: Table[] = []
  while (ordered.length < kept.length) {
    const ready = kept.filter((r) => !placed.has(r.name) && r.refs.every((ref) => placed.has(ref) || !names.has(ref)))
    // A circle of keys has no such order: its tables follow in name order, their keys checked at commit
    // only if deferrable (the schema has no such circle).
    const next = ready.length ? ready : kept.filter((r) => !placed.has(r.name)).slice(0, 1)
    for (const { refs: _, ...table } of next) {
      placed.add(table.name)
      ordered.push(table)
    }
  }
  return ordered
}

// What the header says besides the tables: the migrations applied, the server's version, and the
// sequences' values, read after the tables' lock: never below a value any copied row holds. Each
// sequence is read itself: pg_sequences has no is_called, and its last_value is null whenever
// is_called is false (a setval(..., false) included), not only for a sequence never called.
const readHeader = async (tx: Tx) => {
  const [row] = await tx`
    select array(select name from schema_migrations order by name)::text[] as migrations,
      (select coalesce(max(id), 0) from graphile_worker.migrations)::int as worker,
      current_setting('server_version') as server_version,
      array(select c.oid::regclass::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname in (current_schema(), ${WORKER_SCHEMA}) and c.relkind = 'S' order by 1)::text[] as names`
  const names = row.names as string[]
  const sequences = names.length
    ? await tx.unsafe<Header['sequences']>(
        names
          .map((name, i) => `select $${i + 1}::text as name, last_value::float8 as last_value, is_called from ${name}`)
          .join(' union all '),
        names,
      )
    : []
  return { ...(row as { migrations: string[]; worker: number; server_version: string }), sequences }
}

// Long statements by design: the service's timeouts are for requests.
const unbounded = (tx: Tx) => setLocal(tx, { statement_timeout: '0', idle_in_transaction_session_timeout: '0' })

const countLines = (chunk: Buffer) => {
  let n = 0
  for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) n++
  return n
}

const write = async (out: Writable, data: Buffer | string) => {
  if (!out.write(data)) await once(out, 'drain')
}

// postgres.js pauses its socket when a COPY's stream is full, and resumes it when the stream is read
// from again. When the COPY's last rows and its end arrive together, the stream ends with the socket
// paused, and the transaction's next statement waits forever for an answer already sent (found with a
// backup of a few MB: the worker's job never ended; porsager/postgres#499, unfixed in 3.4.x). The
// stream's read function is the one that resumes the socket: called once every row is read.
const resumeConnection = (stream: Readable) => stream._read(0)

// On Citus one transaction on the coordinator sees each worker at another moment: the file would not
// be one consistent state, so the backup is refused, naming the cluster's own way.
const refuseCitus = async (sql: Sql) => {
  const [citus] = await sql`select 1 from pg_extension where extname = 'citus'`
  if (citus) {
    throw new Error(
      'this database is a Citus cluster: `service backup` exports one snapshot of one server, which a ' +
        'cluster cannot give. Back up every node (a base backup and its WAL archive) and mark points ' +
        "all nodes can be restored to with select citus_create_restore_point('<name>') " +
        '(docs/operations.md, "Running on Citus").',
    )
  }
}

// Writes the backup to `file` (through file.partial, renamed when complete and flushed).
export const backup = async (sql: Sql, file: string, progress?: Progress): Promise<Summary> => {
  await refuseCitus(sql)
  const started = performance.now()
  const partial = `${file}.partial`
  const gzip = createGzip({ level: 1 })
  const disk = createWriteStream(partial, { mode: 0o600, flags: 'wx' })
  gzip.pipe(disk)
  const flushed = finished(disk)
  let rows = 0
  let tables = 0
  try {
    await sql.begin('isolation level repeatable read read only', async (tx) => {
      await unbounded(tx)
      const list = await listTables(tx)
      // A TRUNCATE is not bound by snapshots: locked out until every table is copied.
      await tx.unsafe(`lock table ${list.map((t) => t.name).join(', ')} in access share mode`)
      const { migrations, worker, server_version, sequences } = await readHeader(tx)
      const header: Header = {
        format: FORMAT,
        version: VERSION,
        created_at: new Date().toISOString(),
        server_version,
        migrations,
        worker_migration: worker,
        tables: list.map(({ estimate: _, ...t }) => t),
        sequences,
      }
      await write(gzip, `${JSON.stringify(header)}\n`)
      const estimate = list.reduce((sum, t) => sum + Number(t.estimate), 0)
      const counts: Trailer['rows'] = {}
      for (const table of list) {
        const source = table.partitioned
          ? `(select ${columnList(table.columns)} from ${table.name})`
          : `${table.name} (${columnList(table.columns)})`
        const stream: Readable = await tx.unsafe(`copy ${source} to stdout`).readable()
        let n = 0
        for await (const chunk of stream) {
          n += countLines(chunk)
          await write(gzip, chunk)
          progress?.(rows + n, Math.max(estimate, rows + n), table.name)
        }
        resumeConnection(stream)
        await write(gzip, '\\.\n')
        counts[table.name] = n
        rows += n
        tables++
      }
      await write(gzip, `${JSON.stringify({ rows: counts } satisfies Trailer)}\n`)
    })
    gzip.end()
    await flushed
    renameSync(partial, file)
  } catch (err) {
    gzip.destroy()
    disk.destroy()
    rmSync(partial, { force: true })
    throw err
  }
  return { file, bytes: statSync(file).size, rows, tables, ms: Math.round(performance.now() - started) }
}

// A table's rows end with the line `\.`.
const END = Buffer.from('\\.\n')
const MARK = Buffer.from(`\n${END}`)

// Reads the file's lines as the restore asks for them: the header, then each table's rows in
// chunks of whole lines up to its `\.`, then the trailer. `read` is the share of the file read so far.
const reader = (file: string) => {
  const disk = createReadStream(file)
  const size = statSync(file).size
  const input = disk.pipe(createGunzip())
  const chunks = input[Symbol.asyncIterator]()
  let buffered = Buffer.alloc(0)
  const more = async () => {
    // A file cut short ends the gzip stream early, or inside its compressed data.
    const next = await chunks.next().catch((err: Error) => {
      throw new Error(`${file} is not a complete backup (${err.message})`)
    })
    if (next.done) throw new Error(`${file} ends early: it is not a complete backup`)
    buffered = buffered.length ? Buffer.concat([buffered, next.value]) : next.value
  }
  const line = async () => {
    let end: number
    while ((end = buffered.indexOf(10)) === -1) await more()
    const text = buffered.subarray(0, end).toString('utf8')
    buffered = buffered.subarray(end + 1)
    return text
  }
  // Passes the rows to `out` until the end marker, in whole lines: a row never holds a newline (COPY
  // writes it as \n) and no row's line starts with `\.` (COPY writes a backslash as \\). `buffered`
  // always starts at a line's start.
  const rows = async (out: (lines: Buffer) => Promise<void>) => {
    for (;;) {
      if (buffered.subarray(0, END.length).equals(END)) {
        buffered = buffered.subarray(END.length)
        return
      }
      const end = buffered.indexOf(MARK)
      if (end !== -1) {
        await out(buffered.subarray(0, end + 1))
        buffered = buffered.subarray(end + MARK.length)
        return
      }
      const last = buffered.lastIndexOf(10)
      if (last !== -1) {
        await out(buffered.subarray(0, last + 1))
        buffered = buffered.subarray(last + 1)
      }
      await more()
    }
  }
  const close = () => {
    input.destroy()
    disk.destroy()
  }
  return { line, rows, close, read: () => [disk.bytesRead, size] as const }
}

const SAFE_NAME = /^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$/
const parseHeader = (text: string, file: string): Header => {
  let header: Header | undefined
  try {
    header = JSON.parse(text)
  } catch {}
  if (header?.format !== FORMAT) throw new Error(`${file} is not a backup of this service`)
  if (header.version !== VERSION)
    throw new Error(`${file} is a backup of format ${header.version}; this version reads format ${VERSION}`)
  // The names go into statements: a file that was tampered with must not smuggle SQL in.
  const names = [...header.tables.map((t) => t.name), ...header.sequences.map((q) => q.name)]
  const odd = names.find((name) => !SAFE_NAME.test(name))
  if (odd !== undefined) throw new Error(`${file} names a table or sequence ${JSON.stringify(odd)}, not one of ours`)
  return header
}

// The trailer's row counts against those read: a file whose rows were cut or added to is refused.
const checkTrailer = (file: string, counts: Trailer['rows'], text: string) => {
  let trailer: Trailer | undefined
  try {
    trailer = JSON.parse(text)
  } catch {}
  if (typeof trailer?.rows !== 'object' || trailer.rows === null)
    throw new Error(`${file} ends without its trailer: it is not a complete backup`)
  for (const name of new Set([...Object.keys(counts), ...Object.keys(trailer.rows)]))
    if (counts[name] !== trailer.rows[name])
      throw new Error(`${file}: table ${name} has ${counts[name] ?? 0} rows, not ${trailer.rows[name] ?? 0}`)
}

// Where a table's rows go as they are read: its COPY in a restore, nowhere in the check before it.
interface Sink {
  write: (lines: Buffer) => Promise<void>
  end: () => Promise<void>
}

// One pass over the file: the header, each table's rows (passed to its sink as they are read), then
// the trailer, which they must match. Returns the rows read.
const readAll = async (
  file: string,
  sink: (table: Header['tables'][number]) => Promise<Sink | undefined>,
  progress?: Progress,
) => {
  const input = reader(file)
  try {
    const header = parseHeader(await input.line(), file)
    const counts: Trailer['rows'] = {}
    let rows = 0
    for (const table of header.tables) {
      const out = await sink(table)
      let n = 0
      await input.rows(async (lines) => {
        n += countLines(lines)
        await out?.write(lines)
        progress?.(...input.read(), table.name)
      })
      await out?.end()
      counts[table.name] = n
      rows += n
    }
    checkTrailer(file, counts, await input.line())
    return rows
  } finally {
    input.close()
  }
}

// Reads the whole file as a restore does, writing nothing: the restore's first pass. Returns the rows.
export const checkBackup = (file: string, progress?: Progress) => readAll(file, async () => undefined, progress)

const firstLine = async (file: string) => {
  const input = reader(file)
  try {
    return await input.line()
  } finally {
    input.close()
  }
}

// Whether the database holds anything: a table in the service's schema or graphile-worker's.
const holdsData = async (sql: Sql) =>
  (
    await sql`select exists(select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname in (current_schema(), ${WORKER_SCHEMA}) and c.relkind in ('r', 'p')) as any`
  )[0].any as boolean

export interface Restored {
  rows: number
  tables: number
  migrations: number
  ms: number
}

// Restores `file` into the database, which must hold no tables unless `force` (then the service's
// schema and graphile-worker's are dropped first), and which nobody else may be connected to. The
// schema is made by the migrations the backup names; the service migrates forward when it starts.
export const restore = async (
  sql: Sql,
  url: string,
  file: string,
  options: { force?: boolean; progress?: Progress } = {},
): Promise<Restored> => {
  const started = performance.now()
  const header = parseHeader(await firstLine(file), file)
  const known = migrations()
  const unknown = header.migrations.filter((name) => !known.some((m) => m.name === name))
  if (unknown.length)
    throw new Error(`${file} comes from a newer version of the service (migrations ${unknown.join(', ')})`)
  const [others] = await sql`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`
  if (others.n > 0) throw new Error(`${others.n} other connections use the database: stop the service before a restore`)
  // The whole file is read once before the database is touched: a file cut short or tampered with is
  // refused with the data as it was (a --force restore drops it first; a restore into an empty
  // database migrates it first).
  await checkBackup(file, (done, total, table) => options.progress?.(done, total, `check ${table}`))
  if (await holdsData(sql)) {
    if (!options.force)
      throw new Error('the database is not empty: restore into an empty one, or give --force to replace its data')
    const [{ schema }] = await sql`select quote_ident(current_schema()) as schema`
    await sql.unsafe(`drop schema if exists ${WORKER_SCHEMA} cascade; drop schema ${schema} cascade;
      create schema ${schema}`)
  }
  await migrate(
    sql,
    url,
    known.filter((m) => header.migrations.includes(m.name)),
  )
  let rows = 0
  await sql.begin(async (tx) => {
    await unbounded(tx)
    const [{ worker }] = await tx`select coalesce(max(id), 0)::int as worker from graphile_worker.migrations`
    if (worker < header.worker_migration)
      throw new Error(`${file} comes from a newer graphile-worker (migration ${header.worker_migration})`)
    const names = header.tables.map((t) => t.name).join(', ')
    // The migrations' own rows (a generated key, say) are replaced by the backup's.
    await tx.unsafe(`truncate ${names}`)
    rows = await readAll(
      file,
      async (table) => {
        // The rows come as they were: triggers that derive data (tag ids) must not run again.
        await tx.unsafe(`alter table ${table.name} disable trigger user`)
        const target: Writable = await tx
          .unsafe(`copy ${table.name} (${columnList(table.columns)}) from stdin`)
          .writable()
        return {
          write: (lines) => write(target, lines),
          end: async () => {
            target.end()
            await finished(target)
            await tx.unsafe(`alter table ${table.name} enable trigger user`)
          },
        }
      },
      options.progress,
    )
    for (const s of header.sequences) await tx`select setval(${s.name}::regclass, ${s.last_value}, ${s.is_called})`
    // Jobs locked at the backup were in flight in the backed-up processes: free at once, with an
    // attempt left (tasks are idempotent, as graphile-worker's at-least-once asks). A keyed job
    // replaced while it ran was given max_attempts by add_job, which would leave it queued forever.
    await tx`update graphile_worker._private_jobs
      set locked_at = null, locked_by = null, attempts = least(attempts, greatest(max_attempts - 1, 0))
      where locked_at is not null`
    await tx`update graphile_worker._private_job_queues set locked_at = null, locked_by = null
      where locked_at is not null`
  })
  return {
    rows,
    tables: header.tables.length,
    migrations: header.migrations.length,
    ms: Math.round(performance.now() - started),
  }
}
