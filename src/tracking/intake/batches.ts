import type { App } from '../../context.ts'
import type { Tx } from '../../db/client.ts'
import { type ApplyTask, addJobs, applyJob } from '../../db/jobs.ts'

// The account's queue runs one job at a time, so an apply job draining a large backlog would hold
// every upload of the account behind it (docs/benchmarks.md). A job applies this many batches at
// most, then queues its successor behind them.
export const BATCHES_PER_JOB = 4

// An apply job's batches: one transaction each, the next while the last was `full`; past
// BATCHES_PER_JOB, the successor is added in the last one's transaction. `committed` sees each
// batch's result once it has committed (the counters count what committed).
export const applyBatches = async <T extends { full: boolean }>(
  app: App,
  task: ApplyTask,
  accountId: number,
  batch: (tx: Tx) => Promise<T>,
  committed: (result: T) => void,
) => {
  for (let n = 1; ; n++) {
    const result = (await app.sql.begin(async (tx) => {
      const applied = await batch(tx)
      if (applied.full && n === BATCHES_PER_JOB) await addJobs(tx, [applyJob(task, accountId)])
      return applied
    })) as T
    committed(result)
    if (!result.full || n === BATCHES_PER_JOB) return
  }
}
