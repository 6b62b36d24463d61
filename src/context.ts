import type { Config } from './config.ts'
import type { Sql } from './db/client.ts'
import type { KeyChecker } from './db/key-check.ts'
import type { Log } from './log.ts'

// What every handler, task and command works with: the postgres.js pools, the configuration, the
// log, and this process's view of API keys (db/key-check.ts).
export interface App {
  // Point reads and writes.
  sql: Sql
  // Expensive reads (db/budget.ts): searches, aggregates, segments. A pool of its own, so that they
  // queue behind each other, never in front of a point read or a write.
  heavy: Sql
  // The admin routes and /metrics: a small pool of its own (application_name service-admin), whose
  // statements may touch every account (on Citus, every shard) where the api pools' never do.
  admin: Sql
  config: Config
  log: Log
  keys: KeyChecker
}
