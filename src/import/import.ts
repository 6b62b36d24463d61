import { sourceOfTruth } from '../accounts/accounts.ts'
import { createReadStream } from 'node:fs'
import { basename } from 'node:path'
import { pipeline } from 'node:stream'
import { parse } from 'csv-parse'
import { Refusal } from '../errors.ts'
import { notifyUsers } from '../notifications/notifications.ts'
import { processUpload } from '../uploads/process.ts'
import { checkUpload, insertUpload } from '../uploads/receive.ts'
import type { UploadItem } from '../uploads/schemas.ts'
import { addDropped, type Dropped, noneDropped } from '../values.ts'
import type { Collection } from '../db/tables.ts'
import { checkRow, describeError, readHeader, type Layout } from './rows.ts'
import type { App } from '../context.ts'

const CHUNK_ROWS = 1000

export interface ImportStats {
  bytes: number
  read: number
  imported: number
  errors: number
  created: number
  updated: number
  ignored: number
  warnings: number
  // The last physical line of the last row read (1: the header).
  line: number
}

export const emptyStats = (): ImportStats => ({
  bytes: 0,
  read: 0,
  imported: 0,
  errors: 0,
  created: 0,
  updated: 0,
  ignored: 0,
  warnings: 0,
  line: 0,
})

interface ImportOptions {
  // Import into an account whose source of truth is not FILE.
  force?: boolean
  onStart?: (layout: Layout) => void
  onRowError?: (message: string) => void
  // Aborted (by a signal): no row after the current one is read; what was read is written.
  signal?: AbortSignal
}

// Records of a FILE account come from imports; an import into an account owned by the API or an
// integration would be overwritten by (or overwrite) that source, so it takes --force.
const checkAccount = async (
  app: App,
  accountId: number,
  collection: Collection,
  force: boolean,
) => {
  const source = await sourceOfTruth(app.sql, accountId)
  if (!source) throw new Error(`Account ${accountId} does not exist.`)
  if (source !== 'FILE' && !force) {
    throw new Error(
      `The records of account ${accountId} are owned by its source of truth ${source}; ` +
        'imports go to accounts whose source of truth is FILE (use --force to import anyway).',
    )
  }
  try {
    // No items: only the account-level checks (scoring model, backlog), and its property catalog.
    return (await checkUpload(app, accountId, collection, [], 'FILE')).catalog
  } catch (err) {
    if (err instanceof Refusal) throw new Error(err.message)
    throw err
  }
}

// Each chunk is an upload with source FILE, merged by the upload processing itself in one
// transaction (records, customer.created outbox rows, scoring job). The users hear of the import
// once, when it ends (notifyImport), not once per chunk.
const writeChunk = (
  app: App,
  accountId: number,
  collection: Collection,
  items: UploadItem[],
  dropped: Dropped,
) =>
  app.sql.begin(async (tx) => {
    const [row] = await insertUpload(tx, accountId, collection, 'FILE', items, dropped)
    return processUpload(tx, accountId, row.id, false)
  })

// One notification per import and user, with the import's totals.
const notifyImport = (
  app: App,
  accountId: number,
  collection: Collection,
  file: string,
  stats: ImportStats,
) =>
  notifyUsers(app.sql, accountId, 'import.file', {
    file: basename(file),
    records: collection,
    rows: stats.read,
    imported: stats.imported,
    skipped: stats.errors,
    created: stats.created,
    updated: stats.updated,
    ignored: stats.ignored,
    warnings: stats.warnings,
    finished_at: new Date().toISOString(),
  })

// Lines a record takes: quoted cells may hold line breaks. Counted here rather than taken from
// csv-parse's info.lines, which counts a quoted CRLF as two lines.
const BREAKS = /\r\n?|\n/g
const linesOf = (cells: string[]) => {
  let lines = 1
  for (const cell of cells)
    if (cell.includes('\n') || cell.includes('\r')) lines += cell.match(BREAKS)!.length
  return lines
}

// Streams the file: at most one chunk is being parsed while the previous one is written, so
// memory stays flat whatever the file's size. A bad row is reported and skipped.
export const importFile = async (
  app: App,
  accountId: number,
  collection: Collection,
  file: string,
  stats: ImportStats,
  options: ImportOptions = {},
) => {
  const catalog = await checkAccount(app, accountId, collection, options.force ?? false)
  const parser = parse({ bom: true, info: true, relax_column_count: true, skip_empty_lines: true })
  // pipeline passes a read error (a missing file) on to the parser, ending the loop below with it.
  pipeline(createReadStream(file), parser, () => {})
  let layout: Layout | undefined
  // Physical lines of the records so far; with the skipped empty lines it gives a
  // record's first line.
  let lines = 0
  let chunk: UploadItem[] = []
  let dropped = noneDropped()
  let writing: Promise<void> = Promise.resolve()
  const flush = async () => {
    const items = chunk
    const chunkDropped = dropped
    chunk = []
    dropped = noneDropped()
    await writing
    writing = writeChunk(app, accountId, collection, items, chunkDropped).then((result) => {
      stats.imported += items.length
      if (!result) return
      stats.created += result.created
      stats.updated += result.updated
      stats.ignored += result.ignored
      stats.warnings += result.warnings.length
    })
    // Awaited at the next flush; until then a failure must not count as unhandled.
    writing.catch(() => {})
  }
  for await (const { record, info } of parser as AsyncIterable<{
    record: string[]
    info: { empty_lines: number; bytes: number }
  }>) {
    stats.bytes = info.bytes
    const line = lines + info.empty_lines + 1
    const spans = linesOf(record)
    lines += spans
    stats.line = line + spans - 1
    if (!layout) {
      layout = readHeader(collection, record, catalog)
      options.onStart?.(layout)
      continue
    }
    stats.read++
    const checked = checkRow(layout, record)
    if (!checked.ok) {
      stats.errors++
      for (const e of checked.errors) options.onRowError?.(describeError(line, e))
      continue
    }
    chunk.push(checked.item)
    addDropped(dropped, checked.dropped)
    if (chunk.length >= CHUNK_ROWS) await flush()
    if (options.signal?.aborted) break
  }
  if (!layout) throw new Error('The file is empty: it needs a header row.')
  if (chunk.length) await flush()
  await writing
  await notifyImport(app, accountId, collection, file, stats)
  return stats
}
