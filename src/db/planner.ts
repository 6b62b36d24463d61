import type { Tx } from './client.ts'

// Every planner setting the service changes, each for one transaction (set_config(..., true)): a
// connection pooler such as PgBouncer refuses them as startup parameters. The measurements behind
// them: docs/benchmarks.md, "Figures behind code choices".
export const PLANNER = {
  // The bulk statements of background work (merging an upload, scoring a batch) are above
  // jit_above_cost every time, and compiling them costs more than it saves.
  bulk: { jit: 'off' },
  // A scoring batch also sorts its snapshots in memory, and joins whole batches by hashing even
  // while a new account's rows are missing from the statistics (index scans stay allowed).
  scoringBatch: { jit: 'off', work_mem: '32MB', enable_nestloop: 'off' },
  // One backend per expensive request: parallel workers would let one account take every core.
  oneBackend: { max_parallel_workers_per_gather: '0' },
  // Just-received events are missing from the statistics: a primary-key walk stops after one batch,
  // where a bitmap scan would read the whole backlog.
  freshEvents: { enable_bitmapscan: 'off' },
} satisfies Record<string, Record<string, string>>

// Sets the settings for the rest of the transaction, in one statement.
export const setLocal = (tx: Tx, settings: Record<string, string>) =>
  tx`select set_config(key, value, true) from jsonb_each_text(${tx.json(settings)}::jsonb)`
