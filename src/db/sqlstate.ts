// The SQLSTATE codes the service acts on (PostgreSQL, appendix A), by name.
export const SQLSTATE = {
  UNIQUE_VIOLATION: '23505',
  DEADLOCK_DETECTED: '40P01',
  STATEMENT_TOO_COMPLEX: '54001',
} as const

export const sqlState = (err: unknown) => (err as { code?: unknown })?.code

// Errors that the same statement on the same data raises again on every retry: data exceptions
// (class 22) and integrity constraint violations (class 23). Anything else (a lost connection, a
// serialization failure, a deadlock, a lock timeout, the server shutting down) may pass on retry.
export const isPermanent = (err: unknown) => /^2[23]/.test(String(sqlState(err)))

// Connection failures and server shutdowns (postgres.js codes, SQLSTATE classes 08 and 57P, and
// node-postgres's code-less "Connection terminated"): the database is away, not the request
// wrong, so the answer is 503 rather than 500.
const DATABASE_AWAY =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|CONNECTION_(CLOSED|ENDED|DESTROYED)|CONNECT_TIMEOUT|08...|57P0[1-3])$/
export const isDatabaseAway = (err: unknown) =>
  DATABASE_AWAY.test(String(sqlState(err))) || /^Connection terminated/.test(String((err as Error)?.message))
