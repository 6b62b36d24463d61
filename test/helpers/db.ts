import type { Sql } from '../../src/db/client.ts'
import { clusterFromEnv, createCitusDatabase } from './citus.ts'
import { createDatabase } from './cluster.ts'

// A new empty database in the run's cluster (see test/run.ts); in the Citus pass, on every node.
export const freshDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const base = process.env.TEST_DATABASE_URL
  if (!base) throw new Error('TEST_DATABASE_URL is not set: run the tests with `npm test`.')
  const citus = clusterFromEnv()
  return citus ? createCitusDatabase(citus, 't') : createDatabase(base, 't')
}

const SCORE_TABLES = {
  customers: { scores: 'customer_scores', fk: 'customer_id' },
  contacts: { scores: 'contact_scores', fk: 'contact_id' },
} as const

// Stored scores set directly, for tests whose subject is not the scoring engine: one row per
// record by external id, each row naming the same score columns (sql/009_scores.sql).
export const storeScores = async (
  sql: Sql,
  table: keyof typeof SCORE_TABLES,
  accountId: number,
  rows: Array<{ external_id: string } & Record<string, unknown>>,
) => {
  if (rows.length === 0) return
  const { scores, fk } = SCORE_TABLES[table]
  const found = await sql`select external_id, service_id from ${sql(table)}
    where account_id = ${accountId} and external_id = any(${rows.map((r) => r.external_id)})`
  const ids = new Map(found.map((r) => [r.external_id as string, r.service_id as number]))
  const values = rows.map(({ external_id, ...columns }) => ({
    account_id: accountId,
    [fk]: ids.get(external_id),
    external_id,
    ...columns,
  }))
  const set = Object.keys(values[0])
    .filter((c) => c !== 'account_id' && c !== fk && c !== 'external_id')
    .map((c) => `${c} = excluded.${c}`)
    .join(', ')
  await sql`insert into ${sql(scores)} ${sql(values)} on conflict (account_id, ${sql(fk)})
    do update set ${sql.unsafe(set)}`
}

// Holds an access exclusive lock on the table until the returned function is called: every
// statement reading the table waits (as an active query) until then.
export const lockTable = async (sql: Sql, table: string) => {
  let release!: () => void
  const released = new Promise<void>((r) => (release = r))
  let locked!: () => void
  const held = new Promise<void>((r) => (locked = r))
  const done = sql.begin(async (tx) => {
    await tx`lock table ${tx(table)} in access exclusive mode`
    locked()
    await released
  })
  await held
  return async () => {
    release()
    await done
  }
}

// The tables that belong to no account: the service's own bookkeeping (the rest lead
// with account_id).
export const GLOBAL_TABLES = [
  'accounts',
  'schema_migrations',
  'worker_heartbeats',
  'service_secrets',
  'retention_runs',
  'backup_runs',
  'sign_in_failures',
  'operator_audit_entries',
]
