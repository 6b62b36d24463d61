import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Logger, runMigrations } from 'graphile-worker'
import type { Sql, Tx } from './client.ts'
import { migrationsXactLock, releaseMigrationsLock, tryMigrationsLock } from './locks.ts'
import { distributeTables, hasCitus, hasDistributedTables } from './distribute.ts'

interface Migration {
  name: string
  sql: string
}

// The bundle carries the files in __MIGRATIONS__ (see build.mjs); from source they are
// read from sql/.
declare const __MIGRATIONS__: Migration[] | undefined

const fromDisk = (): Migration[] => {
  const dir = fileURLToPath(new URL('../../sql/', import.meta.url))
  return readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((name) => ({ name, sql: readFileSync(dir + name, 'utf8') }))
}

export const migrations = (): Migration[] =>
  typeof __MIGRATIONS__ !== 'undefined' ? __MIGRATIONS__ : fromDisk()

// The PostgreSQL versions the service is tested on (docs/operations.md): 15 (Debian 12) to 18
// (the embedded server). An older server is refused at start with both versions named.
const MIN_SERVER_VERSION = 15
export const checkServerVersion = (versionNum: number, version: string) => {
  if (versionNum < MIN_SERVER_VERSION * 10_000) {
    throw new Error(
      `PostgreSQL ${version} is too old: the service needs PostgreSQL ${MIN_SERVER_VERSION} or newer ` +
        '(tested on 15 to 18).',
    )
  }
}

// A file whose first line is this marker builds indexes on existing tables without blocking their
// writes: its statements (one per `;` at a line's end) run one by one outside any transaction,
// as CREATE INDEX CONCURRENTLY requires. Each must be idempotent (IF NOT EXISTS); an index that a
// crash left invalid is dropped first, so a retry builds it again instead of skipping it.
const CONCURRENTLY = '-- migrate: concurrently'
const statements = (text: string) =>
  text
    .split(/;\s*$/m)
    .map((st) => st.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean)
const indexBuilt = /^create\s+(?:unique\s+)?index\s+concurrently\s+if\s+not\s+exists\s+(\w+)/i

const MIGRATIONS_TABLE = `create table if not exists schema_migrations
  (name text primary key, applied_at timestamptz not null default now())`

type Reserved = Awaited<ReturnType<Sql['reserve']>>

// A file's statements one by one, for Citus, which refuses a string of several commands on a
// distributed table: split at each `;` outside quotes, dollar quotes and comments.
const splitStatements = (text: string): string[] => {
  const out: string[] = []
  let start = 0
  const token = /\$([A-Za-z_]\w*)?\$|'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|\/\*[\s\S]*?\*\/|;/g
  for (let m = token.exec(text); m; m = token.exec(text)) {
    if (m[0].startsWith('$')) {
      const end = text.indexOf(m[0], token.lastIndex)
      token.lastIndex = end < 0 ? text.length : end + m[0].length
    } else if (m[0] === ';') {
      out.push(text.slice(start, m.index))
      start = token.lastIndex
    }
  }
  out.push(text.slice(start))
  return out.filter((st) => st.replace(/--[^\n]*|\/\*[\s\S]*?\*\//g, '').trim())
}

const runFile = async (conn: Reserved, m: Migration, citus: boolean) => {
  if (!m.sql.startsWith(CONCURRENTLY)) {
    await conn.unsafe('begin')
    try {
      if (citus) for (const statement of splitStatements(m.sql)) await conn.unsafe(statement)
      else await conn.unsafe(m.sql)
      await conn`insert into schema_migrations (name) values (${m.name})`
      await conn.unsafe('commit')
    } catch (err) {
      await conn.unsafe('rollback')
      throw err
    }
    return
  }
  for (const statement of statements(m.sql)) {
    const index = indexBuilt.exec(statement)?.[1]
    if (index) {
      const [left] = await conn`
        select 1 from pg_index i where i.indexrelid = to_regclass(${index}) and not i.indisvalid`
      if (left) await conn.unsafe(`drop index concurrently if exists ${index}`)
    }
    await conn.unsafe(statement)
  }
  await conn`insert into schema_migrations (name) values (${m.name})`
}

// Pending files run in order under a session advisory lock, so concurrent starters wait for each
// other; each ordinary file in one transaction, so a failed one leaves nothing half-applied.
export const migrate = async (
  sql: Sql,
  url: string,
  files: Migration[] = migrations(),
): Promise<string[]> => {
  const [server] = await sql`select current_setting('server_version_num')::int as num,
      current_setting('server_version') as v`
  checkServerVersion(server.num, server.v)
  const conn = await sql.reserve()
  const applied: string[] = []
  try {
    // Polled rather than waited for: a session blocked in pg_advisory_lock is a transaction, which
    // a CREATE INDEX CONCURRENTLY of the holder's migration would wait for to end, a deadlock the
    // server does not detect. Between tries the waiter holds none.
    while (!(await tryMigrationsLock(conn))) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await conn.unsafe(MIGRATIONS_TABLE)
    const done = new Set(
      (await conn<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name),
    )
    const citus = await hasCitus(conn)
    const distributed = citus && (await hasDistributedTables(conn))
    for (const m of files.filter((f) => !done.has(f.name))) {
      await runFile(conn, m, citus)
      applied.push(m.name)
      // On a database Citus already distributes, a table a file creates is distributed once that
      // file has run, so that the next file can declare a foreign key to it (docs/operations.md);
      // plain tables (a new database, one moving to Citus) are distributed once, at the end.
      if (distributed) await distributeTables(conn)
    }
    await distributeTables(conn)
  } finally {
    await releaseMigrationsLock(conn).catch(() => {})
    conn.release()
  }
  await migrateWorker(url)
  return applied
}

// graphile-worker's schema, made or brought to this version's level (in transactions of its own).
export const migrateWorker = (url: string) =>
  runMigrations({ connectionString: url, logger: quietLogger })

// Applies `files` inside the caller's transaction, into a schema that holds none of their tables
// yet (a restore's: its rows follow in the same transaction). A concurrent index build cannot run
// in a transaction, and on empty tables a plain one is the same.
const withoutConcurrently = (statement: string) =>
  statement.replace(/^(create\s+(?:unique\s+)?index|drop\s+index)\s+concurrently\b/i, '$1')
export const migrateWithin = async (tx: Tx, files: Migration[]) => {
  await migrationsXactLock(tx)
  await tx.unsafe(MIGRATIONS_TABLE)
  for (const m of files) {
    if (m.sql.startsWith(CONCURRENTLY))
      for (const statement of statements(m.sql)) await tx.unsafe(withoutConcurrently(statement))
    else await tx.unsafe(m.sql)
    await tx`insert into schema_migrations (name) values (${m.name})`
  }
}

export const quietLogger = new Logger(() => () => {})
