import type { Sql } from './client.ts'

// The fields of a PostgreSQL error that say what it is about (postgres.js names them so).
export interface PgError {
  message?: string
  constraint_name?: string
  table_name?: string
  column_name?: string
  detail?: string
}

// A name a shard gives its table's objects: the table's or the constraint's name, the
// shard's id appended.
const SHARD_NAMED = /"([^"]+)_(\d+)"/g

// On Citus an error raised on a worker node (a constraint the data breaks, say) reaches the client
// of the coordinator with its SQLSTATE, message and detail only, and the message names the shard's
// objects: relation "customers_102056", constraint "no_forbidden_names_102056". This gives the
// error as one PostgreSQL gives it: the table's and the constraint's own names in the text and
// as fields (read back from the shard's id in pg_dist_shard), and the column a not-null violation
// names. Any other error, and every error of a PostgreSQL without Citus, is returned as it is.
export const unsharded = async (sql: Sql, err: PgError): Promise<PgError> => {
  const text = `${err.message ?? ''}\n${err.detail ?? ''}`
  const ids = [...new Set([...text.matchAll(SHARD_NAMED)].map((m) => m[2]))]
  if (ids.length === 0) return err
  const [{ citus }] =
    await sql`select exists (select 1 from pg_extension where extname = 'citus') as citus`
  if (!citus) return err
  const shards = new Map(
    (
      await sql`select shardid::text as id, logicalrelid::regclass::text as relation
        from pg_dist_shard where shardid = any(${ids}::bigint[])`
    ).map((r) => [r.id as string, r.relation as string]),
  )
  if (shards.size === 0) return err
  const fields: PgError = {}
  const named = (s?: string) =>
    s?.replace(SHARD_NAMED, (whole, name: string, id: string) => {
      const relation = shards.get(id)
      if (!relation) return whole
      if (name === relation) fields.table_name = relation
      else fields.constraint_name = name
      return `"${name}"`
    })
  const message = named(err.message)
  const detail = named(err.detail)
  // A not-null violation names its column, quoted, beside the relation; it has no constraint.
  if (fields.table_name && !fields.constraint_name && !err.column_name) {
    const quoted = [...(message ?? '').matchAll(/"([^"]+)"/g)].map((m) => m[1])
    const [column] = await sql`select attname::text as name from pg_attribute
      where attrelid = to_regclass(${fields.table_name}) and attnum > 0
        and attname = any(${quoted})`
    if (column) fields.column_name = column.name as string
  }
  return { ...err, message, detail, ...fields }
}
