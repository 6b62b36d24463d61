import type { Config } from './config.ts'
import type { Sql } from './db/client.ts'
import type { KeyChecker } from './db/key-check.ts'
import type { Log } from './log.ts'

// What every handler, task and command works with: one postgres.js pool, the configuration, the
// log, and this process's view of API keys (db/key-check.ts).
export interface App {
  sql: Sql
  config: Config
  log: Log
  keys: KeyChecker
}
