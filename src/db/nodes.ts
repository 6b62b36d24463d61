import type { Sql } from './client.ts'

// The worker nodes of a Citus cluster that do not answer, as host:port (none on a plain
// PostgreSQL): readiness (/readyz) answers 503 naming them, since every account whose shards they
// hold fails. run_command_on_workers opens (or reuses) a connection to each active worker and runs
// `select 1` there; a node that is down, or does not accept a connection within `timeoutMs`, comes
// back unsuccessful. Its statement touches every node: run it on the admin pool, never an api one.
export const unreachableWorkers = async (sql: Sql, timeoutMs: number): Promise<string[]> => {
  const [{ citus }] =
    await sql`select exists (select from pg_extension where extname = 'citus') as citus`
  if (!citus) return []
  const rows = await sql.begin(async (tx) => {
    await tx`select set_config('citus.node_connection_timeout', ${String(timeoutMs)}, true)`
    return tx<{ node: string }[]>`
      select nodename || ':' || nodeport as node from run_command_on_workers('select 1')
      where not success order by nodename, nodeport`
  })
  return rows.map((r) => r.node)
}
