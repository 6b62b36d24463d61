import postgres from 'postgres'

export type Sql = postgres.Sql<{ bigint: number }>
export type Tx = postgres.TransactionSql<{ bigint: number }>

// Ids are bigint in SQL but stay below 2^53, so they travel as JSON numbers.
export const connect = (url: string, options: { max?: number } = {}): Sql =>
  postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as Sql

// A PostgreSQL built with LLVM (Debian's, for one) compiles every statement estimated above
// jit_above_cost, and the bulk statements of background work are, every time they run: scoring a
// batch, merging an upload. The compiling cost more than it saved. On PostgreSQL 15 the daily run of
// 100,000 customers took 19.9 s with JIT against 4.7 s without, and uploads went 16% slower
// (docs/benchmarks.md). Set per transaction, not as a startup parameter, which a connection pooler
// such as PgBouncer refuses.
export const jitOff = (tx: Tx) => tx`select set_config('jit', 'off', true)`
