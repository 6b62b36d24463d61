import { renameSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { finished } from 'node:stream/promises'
import type postgres from 'postgres'
import type { Sql, Tx } from '../db/client.ts'
import { migrateWithin, migrateWorker, migrations } from '../db/migrate.ts'
import { setLocal } from '../db/planner.ts'
import { releaseRestoredJobs, WORKER_SCHEMA, workerMigration } from '../db/queue.ts'
import { partialName, removeStalePartials } from './files.ts'
import {
  checkTrailer,
  countRows,
  FORMAT,
  type Header,
  openReader,
  openWriter,
  parseHeader,
  type Table,
  type Trailer,
  VERSION,
  write,
} from './format.ts'

// A backup is every logged table of the service's schema and graphile-worker's, exported in one
// repeatable-read snapshot with COPY into one file (its layout: format.ts). A restore creates the
// schema with the migrations named in the header, then copies the rows back.
// Made again by the migrations, with the rows the header names: the lists of applied migrations.
const SKIPPED = new Set(['schema_migrations', `${WORKER_SCHEMA}.migrations`])

interface Listed extends Table {
  // The planner's estimate, for progress only.
  estimate: number
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

// Table and sequence names come as regclass prints them, quoted where they need it; columns
// are quoted here.
const columnList = (columns: string[]) =>
  columns.map((c) => `"${c.replaceAll('"', '""')}"`).join(', ')

type TableRow = {
  name: string
  columns: string[]
  partitioned: boolean
  estimate: number
  refs: string[]
}

// The tables in an order where each comes after those its foreign keys reference, so that a restore
// can check the keys as it copies; unlogged tables (rate-limit windows, worker heartbeats) are
// the running processes' state and are left out.
const listTables = async (tx: Tx): Promise<Listed[]> => {
  const rows = await tx<TableRow[]>`
    select c.oid::regclass::text as name,
      array(select a.attname from pg_attribute a where a.attrelid = c.oid and a.attnum > 0
        and not a.attisdropped
        and a.attgenerated = '' order by a.attnum)::text[] as columns,
      c.relkind = 'p' as partitioned, greatest(c.reltuples, 0)::bigint as estimate,
      array(select distinct f.confrelid::regclass::text from pg_constraint f
        where f.conrelid = c.oid and f.contype = 'f' and f.confrelid <> c.oid)::text[] as refs
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname in (current_schema(), ${WORKER_SCHEMA}) and c.relkind in ('r', 'p')
      and not c.relispartition
      and c.relpersistence = 'p'
    order by 1`
  const kept = rows.filter((r) => !SKIPPED.has(r.name))
  const names = new Set(kept.map((r) => r.name))
  const placed = new Set<string>()
  const ordered: Listed[] = []
  while (ordered.length < kept.length) {
    const ready = kept.filter(
      (r) => !placed.has(r.name) && r.refs.every((ref) => placed.has(ref) || !names.has(ref)),
    )
    // A circle of keys has no such order: its tables follow in name order, their keys checked at
    // commit only if deferrable (the schema has no such circle).
    const next = ready.length ? ready : kept.filter((r) => !placed.has(r.name)).slice(0, 1)
    for (const { refs: _, ...table } of next) {
      placed.add(table.name)
      ordered.push(table)
    }
  }
  return ordered
}

type HeaderRow = { migrations: string[]; worker: number; server_version: string; names: string[] }

// What the header says besides the tables: the migrations applied, the server's version, and the
// sequences' values, read after the tables' lock: never below a value any copied row holds. Each
// sequence is read itself: pg_sequences has no is_called, and its last_value is null whenever
// is_called is false (a setval(..., false) included), not only for a sequence never called.
const readHeader = async (tx: Tx) => {
  const [row] = await tx<HeaderRow[]>`
    select array(select name from schema_migrations order by name)::text[] as migrations,
      ${workerMigration(tx)}::int as worker,
      current_setting('server_version') as server_version,
      array(select c.oid::regclass::text from pg_class c join pg_namespace n
        on n.oid = c.relnamespace
            where n.nspname in (current_schema(), ${WORKER_SCHEMA}) and c.relkind = 'S'
              order by 1)::text[] as names`
  const { names } = row
  const sequences = names.length
    ? await tx.unsafe<Header['sequences']>(
        names
          .map(
            (name, i) =>
              `select $${i + 1}::text as name, last_value::float8 as last_value, is_called from ${name}`,
          )
          .join(' union all '),
        names,
      )
    : []
  return { ...(row as { migrations: string[]; worker: number; server_version: string }), sequences }
}

// Long statements by design: the service's timeouts are for requests.
const unbounded = (tx: Tx) =>
  setLocal(tx, { statement_timeout: '0', idle_in_transaction_session_timeout: '0' })

const countLines = (chunk: Buffer) => {
  let n = 0
  for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) n++
  return n
}

// postgres.js pauses its socket when a COPY's stream is full, and resumes it when the stream is
// read from again. When the COPY's last rows and its end arrive together, the stream ends with
// the socket paused, and the transaction's next statement waits forever for an answer already
// sent (found with a backup of a few MB: the worker's job never ended; porsager/postgres#499,
// unfixed in 3.4.x). The stream's read function is the one that resumes the socket: called
// once every row is read.
const resumeConnection = (stream: Readable) => stream._read(0)

// On Citus one transaction on the coordinator sees each worker at another moment: the file would
// not be one consistent state, so the backup is refused, naming the cluster's own way.
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

// Writes the backup to `file` (through its .partial, renamed when complete and flushed), encrypted
// under `key` when one is given. A .partial that a killed backup left in the folder goes first.
export const backup = async (
  sql: Sql,
  file: string,
  options: { key?: string; progress?: Progress } = {},
): Promise<Summary> => {
  await refuseCitus(sql)
  const started = performance.now()
  const { progress } = options
  removeStalePartials(dirname(file))
  const partial = partialName(file)
  const out = await openWriter(partial, options.key)
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
      await out.write(`${JSON.stringify(header)}\n`)
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
          await out.write(chunk)
          progress?.(rows + n, Math.max(estimate, rows + n), table.name)
        }
        resumeConnection(stream)
        await out.write('\\.\n')
        counts[table.name] = n
        rows += n
        tables++
      }
      await out.write(
        `${JSON.stringify({ rows: counts, sha256: out.digest() } satisfies Trailer)}\n`,
      )
    })
    await out.end()
    renameSync(partial, file)
  } catch (err) {
    out.destroy()
    rmSync(partial, { force: true })
    throw err
  }
  return {
    file,
    bytes: statSync(file).size,
    rows,
    tables,
    ms: Math.round(performance.now() - started),
  }
}

// Where a table's rows go as they are read: its COPY in a restore, nowhere in the check before it.
interface Sink {
  write: (lines: Buffer) => Promise<void>
  end: () => Promise<void>
}

// One pass over the file: the header, each table's rows (each of the table's width, passed to its
// sink as they are read), then the trailer, which they must match. Returns the rows read.
const readAll = async (
  file: string,
  key: string | undefined,
  sink: (table: Table) => Promise<Sink | undefined>,
  progress?: Progress,
) => {
  const input = await openReader(file, key)
  try {
    const header = parseHeader(await input.line(), file)
    const counts: Trailer['rows'] = {}
    let rows = 0
    for (const table of header.tables) {
      const out = await sink(table)
      let n = 0
      await input.rows(async (lines) => {
        n += countRows(lines, table, n, file)
        await out?.write(lines)
        progress?.(...input.read(), table.name)
      })
      await out?.end()
      counts[table.name] = n
      rows += n
    }
    checkTrailer(file, header, counts, input.digest(), await input.line())
    return rows
  } finally {
    input.close()
  }
}

// Reads the whole file as a restore does, writing nothing: the restore's first pass.
// Returns the rows.
export const checkBackup = (file: string, key?: string, progress?: Progress) =>
  readAll(file, key, async () => undefined, progress)

const readHeaderLine = async (file: string, key: string | undefined) => {
  const input = await openReader(file, key)
  try {
    return parseHeader(await input.line(), file)
  } finally {
    input.close()
  }
}

// Whether the database holds the service's tables. graphile-worker's schema alone is not data of
// the service (a restore into an empty database makes it first, outside the restore's transaction).
const holdsData = async (sql: Sql) =>
  (
    await sql<{ any: boolean }[]>`
      select exists(select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p')) as any`
  )[0].any

// The header's tables and columns against the schema its migrations made: a COPY that names a
// column the table lacks would fail, but a refusal here says which.
const checkColumns = async (tx: Tx, header: Header, file: string) => {
  const schema = new Map((await listTables(tx)).map((t) => [t.name, new Set(t.columns)]))
  for (const table of header.tables) {
    const columns = schema.get(table.name)
    if (!columns)
      throw new Error(`${file} holds table ${table.name}, which its migrations do not make`)
    const odd = table.columns.find((c) => !columns.has(c))
    if (odd !== undefined)
      throw new Error(
        `${file} names column ${JSON.stringify(odd)} of table ${table.name}, which its migrations do not make`,
      )
  }
}

// A row COPY refuses (a field of the wrong type, a key that points nowhere) is named with
// its table, line and column, which PostgreSQL gives in the error's context (after a JSON
// parser's own line).
const copyRefusal = (file: string, err: unknown) => {
  const { message, detail, where } = err as postgres.PostgresError
  const copy = where?.split('\n').find((line) => line.startsWith('COPY '))
  return copy
    ? new Error(`${file} is refused: ${message}${detail ? `: ${detail}` : ''} (${copy})`)
    : err
}

export interface Restored {
  rows: number
  tables: number
  migrations: number
  ms: number
}

// Restores `file` into the database, which must hold no tables of the service unless `force`, and
// which nobody else may be connected to. The schema is made by the migrations the backup names (the
// service migrates forward when it starts). Everything but graphile-worker's migrations runs in one
// transaction: dropping the service's schema, making it again, emptying the queue, copying
// the rows. A file that fails at any row, in the check before or in the copy itself, leaves
// the data as it was.
export const restore = async (
  sql: Sql,
  url: string,
  file: string,
  options: { force?: boolean; key?: string; progress?: Progress } = {},
): Promise<Restored> => {
  const started = performance.now()
  const { key } = options
  const header = await readHeaderLine(file, key)
  const known = migrations()
  const unknown = header.migrations.filter((name) => !known.some((m) => m.name === name))
  if (unknown.length)
    throw new Error(
      `${file} comes from a newer version of the service (migrations ${unknown.join(', ')})`,
    )
  const [others] = await sql`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid()
      and backend_type = 'client backend'`
  if (others.n > 0)
    throw new Error(
      `${others.n} other connections use the database: stop the service before a restore`,
    )
  // The whole file is read once before the database is touched: its refusals (a file cut short,
  // changed, of the wrong width) come before any statement, with their reasons.
  await checkBackup(file, key, (done, total, table) =>
    options.progress?.(done, total, `check ${table}`),
  )
  const replacing = await holdsData(sql)
  if (replacing && !options.force)
    throw new Error(
      'the database is not empty: restore into an empty one, or give --force to replace its data',
    )
  await migrateWorker(url)
  let rows = 0
  await sql
    .begin(async (tx) => {
      await unbounded(tx)
      const [{ worker, schema }] = await tx`select ${workerMigration(tx)}::int as worker,
        quote_ident(current_schema()) as schema`
      if (worker < header.worker_migration)
        throw new Error(
          `${file} comes from a newer graphile-worker (migration ${header.worker_migration})`,
        )
      if (replacing) await tx.unsafe(`drop schema ${schema} cascade; create schema ${schema}`)
      await migrateWithin(
        tx,
        known.filter((m) => header.migrations.includes(m.name)),
      )
      await checkColumns(tx, header, file)
      // The migrations' own rows (a generated key, say) and the queue's jobs are replaced
      // by the backup's.
      await tx.unsafe(`truncate ${header.tables.map((t) => t.name).join(', ')}`)
      rows = await readAll(
        file,
        key,
        async (table) => {
          // The rows come as they were: triggers that derive data (tag ids) must not run again.
          await tx.unsafe(`alter table ${table.name} disable trigger user`)
          const target: Writable = await tx
            .unsafe(`copy ${table.name} (${columnList(table.columns)}) from stdin`)
            .writable()
          // The COPY's error is read at the next write or at the end (`write`, `finished`).
          target.on('error', () => {})
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
      for (const s of header.sequences)
        await tx`select setval(${s.name}::regclass, ${s.last_value}, ${s.is_called})`
      await releaseRestoredJobs(tx)
    })
    .catch((err) => {
      throw copyRefusal(file, err)
    })
  return {
    rows,
    tables: header.tables.length,
    migrations: header.migrations.length,
    ms: Math.round(performance.now() - started),
  }
}
