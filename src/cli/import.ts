import { statSync } from 'node:fs'
import cliProgress from 'cli-progress'
import { emptyStats, importFile, type ImportStats } from '../import/import.ts'
import type { App } from '../context.ts'

export const importUsage = `service import customers|contacts FILE.csv --account ID [--force]

Imports a CSV file into an account through the upload processing (webhook source FILE).
Header row, then one record per row:
  customers  external_id,name[,owner_email][,date][,<attribute or metric codename>...]
  contacts   customer_external_id,contact_external_id,contact_name[,date][,<codename>...]
Cells are read by the property's type (number, boolean true/false, date YYYY-MM-DD); an empty cell
leaves the value unchanged. With a date column each row also stores one metric snapshot on that
date. Columns that name no property are ignored. A bad row is reported with its line number and
skipped. The account's source of truth must be FILE unless --force is given.
Owners (owner_email) are matched to the account's users: add them first with service admin add-user.
Progress goes to stderr (a bar on a terminal, a line every 2 s otherwise), the summary to stdout; an
import that is refused or fails says why there. SIGINT or SIGTERM stops it after the row being read:
the rows read are written and the summary names the last line read.
Exit status: 0 every row imported, 1 some rows skipped, 2 the import could not run or stopped.
`

const PLAIN_EVERY_MS = 2000

const rate = (stats: ImportStats, started: number) =>
  Math.round(stats.read / Math.max((performance.now() - started) / 1000, 0.001))
const percent = (stats: ImportStats, total: number) =>
  total ? Math.floor((100 * stats.bytes) / total) : 100

// A bar on a terminal; on a pipe or file, one plain line every 2 s.
const progress = (stats: ImportStats, totalBytes: number, started: number) => {
  const out = process.stderr
  if (out.isTTY) {
    // A MultiBar of one: its log() prints messages above the bar without breaking it.
    const bars = new cliProgress.MultiBar(
      {
        stream: out,
        hideCursor: true,
        format:
          '{bar} {percentage}% | {read} rows | {rate} rows/s | {errors} errors | {duration_formatted}',
      },
      cliProgress.Presets.shades_classic,
    )
    const values = () => ({ read: stats.read, rate: rate(stats, started), errors: stats.errors })
    const bar = bars.create(totalBytes, 0, values())
    const timer = setInterval(() => bar.update(stats.bytes, values()), 200)
    return {
      print: (line: string) => bars.log(`${line}\n`),
      stop: () => {
        clearInterval(timer)
        bar.update(stats.bytes, values())
        bars.update() // flushes messages still waiting for the next redraw
        bars.stop()
      },
    }
  }
  const timer = setInterval(
    () =>
      out.write(
        `progress: ${stats.read} rows read, ${stats.imported} imported, ${stats.errors} errors, ` +
          `${rate(stats, started)} rows/s, ${percent(stats, totalBytes)}%\n`,
      ),
    PLAIN_EVERY_MS,
  )
  return { print: (line: string) => out.write(`${line}\n`), stop: () => clearInterval(timer) }
}

const counts = (stats: ImportStats) =>
  `${stats.imported} imported (${stats.created} created, ${stats.updated} updated` +
  `${stats.ignored ? `, ${stats.ignored} ignored for want of their customer` : ''}), ` +
  `${stats.errors} with errors skipped` +
  `${stats.warnings ? `, ${stats.warnings} warnings (unknown owner emails)` : ''}`

// Owners are matched to the account's users by email; a row whose owner is no user sets no owner.
const ownersHint = (stats: ImportStats, accountId: number) =>
  stats.warnings
    ? `${stats.warnings} rows named an owner email that is no user of account ${accountId}, so their owner was ` +
      `not set: owners must exist as users first (service admin add-user --id ${accountId} ` +
      `'{"email":"...","name":"..."}'), then import the file again.\n`
    : ''

// How the run ended, on stdout: a run that did not finish never reads as a success.
const summary = (
  stats: ImportStats,
  seconds: number,
  accountId: number,
  end: { failure?: unknown; signal?: string },
) => {
  const took = `in ${seconds.toFixed(1)} s`
  const reason = String((end.failure as Error)?.message ?? end.failure)
  if (end.failure && !stats.read) return `Nothing imported: ${reason}\n`
  const stopped = end.failure
    ? `Import failed after line ${stats.line}: ${reason}\nRead ${stats.read} rows before it failed: `
    : end.signal
      ? `Import stopped by ${end.signal} after line ${stats.line}; the lines after it were not read.\n` +
        `Read ${stats.read} rows before it stopped: `
      : `Read ${stats.read} rows: `
  return `${stopped}${counts(stats)}, ${took}.\n${ownersHint(stats, accountId)}`
}

// SIGINT or SIGTERM stops the import after the row being read; the rows read so far are written and
// the summary says where it stopped. A second signal ends the process at once.
const stopOnSignal = () => {
  const stop = new AbortController()
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(2)
    stop.abort(signal)
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  return {
    signal: stop.signal,
    done: () => {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    },
  }
}

export const runImport = async (app: App, args: string[]): Promise<number> => {
  const [kind, file, ...rest] = args
  const i = rest.indexOf('--account')
  const accountId = i >= 0 ? Number(rest[i + 1]) : NaN
  if (
    (kind !== 'customers' && kind !== 'contacts') ||
    !file ||
    !(Number.isSafeInteger(accountId) && accountId > 0)
  ) {
    process.stderr.write(importUsage)
    return 2
  }
  let totalBytes: number
  try {
    totalBytes = statSync(file).size
  } catch {
    process.stdout.write(`Nothing imported: cannot read ${file}.\n`)
    return 2
  }
  const stats = emptyStats()
  const started = performance.now()
  const stop = stopOnSignal()
  let bar: ReturnType<typeof progress> | undefined
  let failure: unknown
  try {
    await importFile(app, accountId, kind, file, stats, {
      force: rest.includes('--force'),
      signal: stop.signal,
      onStart: (layout) => {
        if (layout.ignored.length)
          process.stderr.write(
            `Ignoring columns that name no ${kind.slice(0, -1)} property: ${layout.ignored.join(', ')}\n`,
          )
        bar = progress(stats, totalBytes, started)
      },
      onRowError: (message) => (bar ? bar.print(message) : process.stderr.write(`${message}\n`)),
    })
  } catch (err) {
    failure = err
  } finally {
    bar?.stop()
    stop.done()
  }
  const signal = stop.signal.aborted ? String(stop.signal.reason) : undefined
  process.stdout.write(
    summary(stats, (performance.now() - started) / 1000, accountId, { failure, signal }),
  )
  return failure || signal ? 2 : stats.errors ? 1 : 0
}
