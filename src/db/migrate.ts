import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Logger, runMigrations } from 'graphile-worker'
import type { Sql } from './client.ts'

export interface Migration {
  name: string
  sql: string
}

// The bundle carries the files in __MIGRATIONS__ (see build.mjs); from source they are read from sql/.
declare const __MIGRATIONS__: Migration[] | undefined

const fromDisk = (): Migration[] => {
  const dir = fileURLToPath(new URL('../../sql/', import.meta.url))
  return readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((name) => ({ name, sql: readFileSync(dir + name, 'utf8') }))
}

export const migrations = (): Migration[] => (typeof __MIGRATIONS__ !== 'undefined' ? __MIGRATIONS__ : fromDisk())

// All pending files run in one transaction under an advisory lock, so concurrent starters
// wait for each other and a failed file leaves nothing half-applied.
export const migrate = async (sql: Sql, url: string): Promise<string[]> => {
  const applied = await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtext('service:migrations'))`
    await tx`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`
    const done = new Set((await tx`select name from schema_migrations`).map((r) => r.name as string))
    const pending = migrations().filter((m) => !done.has(m.name))
    for (const m of pending) {
      await tx.unsafe(m.sql)
      await tx`insert into schema_migrations (name) values (${m.name})`
    }
    return pending.map((m) => m.name)
  })
  await runMigrations({ connectionString: url, logger: quietLogger })
  return applied
}

export const quietLogger = new Logger(() => () => {})
