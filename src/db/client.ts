import postgres from 'postgres'

export type Sql = postgres.Sql<{ bigint: number }>
export type Tx = postgres.TransactionSql<{ bigint: number }>
export type ReservedSql = postgres.ReservedSql<{ bigint: number }>

// Ids are bigint in SQL but stay below 2^53, so they travel as JSON numbers.
// `settings`: server settings sent when each connection starts (SERVICE_API_DB_SETTINGS).
export const connect = (url: string, options: { max?: number; settings?: Record<string, string> } = {}): Sql =>
  postgres(url, {
    max: options.max ?? 10,
    connection: options.settings,
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as Sql

// The cheapest round trip: whether the database answers at all (readiness).
export const ping = (sql: Sql) => sql`select 1`
