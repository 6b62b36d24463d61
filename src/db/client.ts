import postgres from 'postgres'

export type Sql = postgres.Sql<{ bigint: number }>
export type Tx = postgres.TransactionSql<{ bigint: number }>
export type ReservedSql = postgres.ReservedSql<{ bigint: number }>

// Who a pool's connections work for, named to the server as application_name `service-<role>`
// (pg_stat_activity, logs; docs/operations.md, "Database roles"): `api` serves service-key
// requests, `admin` the admin routes, /metrics and the commands, `worker` the background jobs.
// `parameters`: more startup parameters (run-time settings of every session of the pool).
export type Role = 'api' | 'admin' | 'worker'
export const applicationName = (role: Role) => `service-${role}`

// Ids are bigint in SQL but stay below 2^53, so they travel as JSON numbers.
export const connect = (
  url: string,
  options: { max?: number; role?: Role; parameters?: Record<string, string> } = {},
): Sql =>
  postgres(url, {
    max: options.max ?? 10,
    connection: {
      ...(options.role && { application_name: applicationName(options.role) }),
      ...options.parameters,
    },
    onnotice: () => {},
    types: {
      bigint: {
        to: 20,
        from: [20],
        serialize: (x: number) => String(x),
        parse: (x: string) => Number(x),
      },
    },
  })

// The cheapest round trip: whether the database answers at all (readiness).
export const ping = (sql: Sql) => sql`select 1`
