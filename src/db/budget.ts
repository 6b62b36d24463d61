// The budget of an expensive request (a search, an aggregate, a segment's search or recomputation):
// its statements run in one transaction on the pool of expensive work (App.heavy), each under the
// statement timeout of its class, and are cancelled when the client goes. Point reads and writes
// use App.sql and never wait behind them.
import type { App } from '../context.ts'
import { refuse } from '../errors.ts'
import type { Tx } from './client.ts'
import { PLANNER, setLocal } from './planner.ts'
import { SQLSTATE, sqlState } from './sqlstate.ts'

type Budget = 'search' | 'aggregate' | 'segment'

// Whom the work is for: a client that may go (signal), and the time its request already spent
// waiting for its account's turn (http/router.ts), which counts against its budget.
export interface Caller {
  signal?: AbortSignal
  waitedMs?: number
}

const TIMEOUTS: Record<Budget, (config: App['config']) => number> = {
  search: (c) => c.searchTimeoutMs,
  aggregate: (c) => c.aggregateTimeoutMs,
  segment: (c) => c.segmentTimeoutMs,
}

// A statement of the budget: postgres.js sends the cancel request for it when the client goes.
export type Track = <Q extends { cancel: () => void } & Promise<unknown>>(query: Q) => Q

const HOW_TO_NARROW =
  'Narrow it: fewer IN values or filters, a more selective filter, fewer aggregate fields or buckets, ' +
  'or count "estimate" instead of "exact".'

// For a read-committed transaction of reads alone (a search): on Citus, its SELECTs then open no
// transaction on the worker, whose BEGIN, assign_distributed_transaction_id and COMMIT are round
// trips of their own (docs/benchmarks.md, "Citus"). Under read committed each statement reads its
// own snapshot either way, and reads leave nothing to commit. Without Citus, a placeholder.
export const READS_ALONE = { 'citus.select_opens_transaction_block': 'off' }

// Runs `work` in a transaction on app.heavy under the budget's statement timeout (`mode`: how the
// transaction begins, such as "isolation level repeatable read read only"; `settings`: more for
// the transaction, such as READS_ALONE). `work` passes each
// statement that may run long through `track`, so that an abort of `signal` cancels it. A statement
// over its budget is a 422 naming the budget; one cancelled because the client went is a 499.
export const budgeted = async <T>(
  app: App,
  caller: Caller | undefined,
  budget: Budget,
  work: (tx: Tx, track: Track) => Promise<T>,
  mode = '',
  settings: Record<string, string> = {},
): Promise<T> => {
  const ms = TIMEOUTS[budget](app.config)
  const signal = caller?.signal
  const left = Math.max(1, Math.round(ms - (caller?.waitedMs ?? 0)))
  const pending = new Set<{ cancel: () => void }>()
  const cancel = () => {
    for (const query of pending) query.cancel()
  }
  const track: Track = (query) => {
    // Never cancel a statement not sent yet: inside a transaction postgres.js 3.4 then marks the
    // connection full and never sends another statement on it, the rollback included, so the
    // transaction would stay open with its locks (its client gone, the next is simply not sent).
    if (signal?.aborted) gone()
    pending.add(query)
    query.then(
      () => pending.delete(query),
      () => pending.delete(query),
    )
    return query
  }
  signal?.addEventListener('abort', cancel, { once: true })
  // The statement timeout bounds each statement; this bounds the request's statements together.
  const deadline = setTimeout(cancel, left)
  try {
    return (await app.heavy.begin(mode, async (tx) => {
      if (signal?.aborted) gone()
      await setLocal(tx, { statement_timeout: String(left), ...PLANNER.oneBackend, ...settings })
      return work(tx, track)
    })) as T
  } catch (err) {
    if (sqlState(err) !== SQLSTATE.QUERY_CANCELED) throw err
    if (signal?.aborted) gone()
    return refuse(
      422,
      `The query ran past the ${budget} budget of ${ms} ms and was stopped. ${HOW_TO_NARROW}`,
    )
  } finally {
    clearTimeout(deadline)
    signal?.removeEventListener('abort', cancel)
  }
}

// A budgeted answer that streams (an export). `open` reads what the answer needs before its first
// byte, so that a refusal (a 404) is still an answer of its own, and returns the stream of the
// rest, read in the same transaction batch by batch, each batch under the budget's statement
// timeout. The transaction ends with the stream: read to its end, broken off, or never read
// because the client went.
export const budgetedStream = async (
  app: App,
  caller: Caller | undefined,
  budget: Budget,
  mode: string,
  open: (tx: Tx, track: Track) => Promise<AsyncIterable<string>>,
): Promise<AsyncIterable<string>> => {
  let ready!: (chunks: AsyncIterable<string>) => void
  let end!: () => void
  const opened = new Promise<AsyncIterable<string>>((resolve) => (ready = resolve))
  const ended = new Promise<void>((resolve) => (end = resolve))
  let started = false
  caller?.signal?.addEventListener('abort', () => started || end(), { once: true })
  const run = budgeted(
    app,
    caller,
    budget,
    async (tx, track) => {
      ready(await open(tx, track))
      await ended
    },
    mode,
  )
  // The transaction fails before the stream opens (a refusal), or opens it and waits for its end.
  const chunks = await Promise.race([opened, run.then(() => opened)])
  return (async function* () {
    started = true
    try {
      yield* chunks
    } finally {
      end()
      await run
    }
  })()
}

// Nobody reads the answer; the status is for the log.
const gone = (): never => refuse(499, 'The client closed the request before its answer.')
