// The SQLSTATE codes the service acts on (PostgreSQL, appendix A), by name.
export const SQLSTATE = {
  FOREIGN_KEY_VIOLATION: '23503',
  UNIQUE_VIOLATION: '23505',
  EXCLUSION_VIOLATION: '23P01',
  NUMERIC_VALUE_OUT_OF_RANGE: '22003',
  DEADLOCK_DETECTED: '40P01',
  // A statement timeout, or a cancel request (db/budget.ts).
  QUERY_CANCELED: '57014',
} as const

export const sqlState = (err: unknown) => (err as { code?: unknown })?.code

// Integrity errors that a concurrent writer can cause (a single-record create inserting the same
// external id, a delete of the customer a contact points at): the retry sees the other
// transaction's row and passes. They count as permanent only from RACE_ATTEMPTS on.
const RACE_PRONE: string[] = [
  SQLSTATE.UNIQUE_VIOLATION,
  SQLSTATE.FOREIGN_KEY_VIOLATION,
  SQLSTATE.EXCLUSION_VIOLATION,
]
const RACE_ATTEMPTS = 3

// Errors that the same statement on the same data raises again on every retry: data exceptions
// (class 22) and integrity constraint violations (class 23) of the input. Anything else (a lost
// connection, a serialization failure, a deadlock, a lock timeout, the server shutting down) may
// pass on retry. `attempt` counts from 1; the race-prone ones of class 23 wait for RACE_ATTEMPTS.
export const isPermanent = (err: unknown, attempt = 1) => {
  const code = String(sqlState(err))
  if (!/^2[23]/.test(code)) return false
  return !RACE_PRONE.includes(code) || attempt >= RACE_ATTEMPTS
}

// Connection failures and server shutdowns (postgres.js codes, SQLSTATE classes 08 and 57P, and
// node-postgres's code-less "Connection terminated"): the database is away, not the request
// wrong, so the answer is 503 rather than 500.
const DATABASE_AWAY =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|CONNECTION_(CLOSED|ENDED|DESTROYED)|CONNECT_TIMEOUT|08...|57P0[1-3])$/
export const isDatabaseAway = (err: unknown) =>
  DATABASE_AWAY.test(String(sqlState(err))) ||
  /^Connection terminated/.test(String((err as Error)?.message))
