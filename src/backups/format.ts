import { createHash } from 'node:crypto'
import { once } from 'node:events'
import {
  closeSync,
  createReadStream,
  createWriteStream,
  openSync,
  readSync,
  statSync,
} from 'node:fs'
import { pipeline as pipe, Readable, type Writable } from 'node:stream'
import type { ReadableStream as WebReadable } from 'node:stream/web'
import { pipeline } from 'node:stream/promises'
import { createGunzip, createGzip } from 'node:zlib'
import { Decrypter, Encrypter } from 'age-encryption'

// The backup file (docs/operations.md, "Backups"). Its content:
//   line 1   the header, JSON: format, version, the migrations applied, the tables in restore order
//            with their columns, the sequences' values
//   then     each table's rows in COPY's text format, one line a row, ended by a line `\.`
//   last     the trailer, JSON: each table's row count, which also proves the file complete,
//            and the SHA-256 of every byte before the trailer's line, which catches a changed
//            byte.
// The file is the content in gzip; with SERVICE_BACKUP_KEY, that gzip encrypted with age under the
// key as a passphrase (scrypt), which authenticates every 64 KiB and the end.
export const FORMAT = 'customer-data-service backup'
export const VERSION = 2
// Format 1 is format 2 without the digest: its files are still read, trusted as gzip checks them.
const READABLE = [1, 2]
// An age file under a passphrase costs scrypt with 2^16 rounds (64 MiB, half a second here) to
// open; age's own default of 2^18 takes 256 MiB of the worker's memory for every backup.
const SCRYPT_LOG_N = 16
const AGE_MAGIC = Buffer.from('age-encryption.org/v1\n')

export interface Table {
  // Schema-qualified unless on the search path (the service's own schema; graphile_worker's
  // is not).
  name: string
  columns: string[]
  // A partitioned table is copied through a query; a plain one directly.
  partitioned: boolean
}
export interface Header {
  format: string
  version: number
  created_at: string
  server_version: string
  migrations: string[]
  worker_migration: number
  tables: Table[]
  sequences: { name: string; last_value: number; is_called: boolean }[]
}
export interface Trailer {
  rows: Record<string, number>
  sha256?: string
}

export const write = async (out: Writable, data: Buffer | string) => {
  // A stream destroyed by its error (postgres.js's COPY, when the server refuses a row) emits no
  // 'drain': waiting for one would wait forever.
  if (out.destroyed) throw out.errored ?? new Error('the stream was closed')
  if (!out.write(data)) await once(out, 'drain')
}

// The content's way to the file: hashed, compressed, encrypted under `key` when there is one.
// `end` resolves when every byte is on the disk.
export const openWriter = async (path: string, key: string | undefined) => {
  const gzip = createGzip({ level: 1 })
  const disk = createWriteStream(path, { mode: 0o600, flags: 'wx' })
  const hash = createHash('sha256')
  let sealed: Readable | undefined
  if (key) {
    const encrypter = new Encrypter()
    encrypter.setPassphrase(key)
    encrypter.setScryptWorkFactor(SCRYPT_LOG_N)
    const web = await encrypter.encrypt(Readable.toWeb(gzip) as ReadableStream<Uint8Array>)
    sealed = Readable.fromWeb(web as WebReadable<Uint8Array>)
  }
  // pipeline() destroys its stages on any one's error; gzip, then, with it, so that the content's
  // next write fails rather than waits.
  const flushed = sealed ? pipeline(sealed, disk) : pipeline(gzip, disk)
  flushed.catch((err: Error) => gzip.destroy(err))
  return {
    write: (data: Buffer | string) => {
      hash.update(data)
      return write(gzip, data)
    },
    digest: () => hash.copy().digest('hex'),
    end: async () => {
      gzip.end()
      await flushed
    },
    destroy: () => {
      for (const stage of [gzip, sealed, disk]) stage?.destroy()
    },
  }
}

// Whether the file is age's: an encrypted backup.
const isSealed = (file: string) => {
  const start = Buffer.alloc(AGE_MAGIC.length)
  const fd = openSync(file, 'r')
  try {
    return readSync(fd, start, 0, start.length, 0) === start.length && start.equals(AGE_MAGIC)
  } finally {
    closeSync(fd)
  }
}

// A table's rows end with the line `\.`.
const END = Buffer.from('\\.\n')
const MARK = Buffer.from(`\n${END}`)

// Reads the file's lines as the restore asks for them: the header, then each table's rows in
// chunks of whole lines up to its `\.`, then the trailer. `read` is the share of the file read so
// far; `digest` the SHA-256 of the content read so far.
export const openReader = async (file: string, key: string | undefined) => {
  const encrypted = isSealed(file)
  if (encrypted && !key)
    throw new Error(`${file} is encrypted: set SERVICE_BACKUP_KEY to the key it was made with`)
  // Anybody can write a plain file that passes its own digest: with a key, only a sealed
  // file is trusted.
  if (!encrypted && key)
    throw new Error(
      `${file} is not encrypted, so SERVICE_BACKUP_KEY cannot authenticate it: ` +
        'unset SERVICE_BACKUP_KEY to restore it as it is',
    )
  const size = statSync(file).size
  const disk = createReadStream(file)
  const unauthentic = (err: Error) =>
    new Error(
      `${file} fails authentication with SERVICE_BACKUP_KEY (a wrong key, or a changed file): ${err.message}`,
    )
  let source: Readable = disk
  if (encrypted) {
    const decrypter = new Decrypter()
    decrypter.addPassphrase(key as string)
    const web = await decrypter
      .decrypt(Readable.toWeb(disk) as ReadableStream<Uint8Array>)
      .catch((err: Error) => {
        disk.destroy()
        throw unauthentic(err)
      })
    source = Readable.fromWeb(web as WebReadable<Uint8Array>)
  }
  // Any stage's error ends the last one with it, where `more` reads it.
  const input = pipe(source, createGunzip(), () => {})
  const chunks = input[Symbol.asyncIterator]()
  const hash = createHash('sha256')
  let buffered = Buffer.alloc(0)
  const more = async () => {
    // A file cut short ends the gzip stream early, or inside its compressed data; age's own checks
    // come first in a sealed file.
    const next = await chunks.next().catch((err: NodeJS.ErrnoException) => {
      if (encrypted && !err.code?.startsWith('Z_')) throw unauthentic(err)
      throw new Error(`${file} is not a complete backup (${err.message})`)
    })
    if (next.done) throw new Error(`${file} ends early: it is not a complete backup`)
    buffered = buffered.length ? Buffer.concat([buffered, next.value]) : next.value
  }
  const take = (n: number, skip = 0) => {
    const taken = buffered.subarray(0, n)
    hash.update(buffered.subarray(0, n + skip))
    buffered = buffered.subarray(n + skip)
    return taken
  }
  const line = async () => {
    let end: number
    while ((end = buffered.indexOf(10)) === -1) await more()
    return take(end, 1).toString('utf8')
  }
  // Passes the rows to `out` until the end marker, in whole lines: a row never holds a newline
  // (COPY writes it as \n) and no row's line starts with `\.` (COPY writes a backslash as \\).
  // `buffered` always starts at a line's start.
  const rows = async (out: (lines: Buffer) => Promise<void>) => {
    for (;;) {
      if (buffered.subarray(0, END.length).equals(END)) {
        take(0, END.length)
        return
      }
      const end = buffered.indexOf(MARK)
      if (end !== -1) {
        await out(take(end + 1, END.length))
        return
      }
      const last = buffered.lastIndexOf(10)
      if (last !== -1) await out(take(last + 1))
      await more()
    }
  }
  const close = () => {
    input.destroy()
    disk.destroy()
  }
  return {
    line,
    rows,
    close,
    digest: () => hash.copy().digest('hex'),
    read: () => [disk.bytesRead, size] as const,
  }
}

const SAFE_NAME = /^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$/
export const parseHeader = (text: string, file: string): Header => {
  let header: Header | undefined
  try {
    header = JSON.parse(text)
  } catch {}
  if (header?.format !== FORMAT) throw new Error(`${file} is not a backup of this service`)
  if (!READABLE.includes(header.version))
    throw new Error(
      `${file} is a backup of format ${header.version}; this version reads formats ${READABLE.join(', ')}`,
    )
  // The names go into statements: a file that was tampered with must not smuggle SQL in.
  const names = [...header.tables.map((t) => t.name), ...header.sequences.map((q) => q.name)]
  const odd = names.find((name) => !SAFE_NAME.test(name))
  if (odd !== undefined)
    throw new Error(`${file} names a table or sequence ${JSON.stringify(odd)}, not one of ours`)
  return header
}

// The trailer's row counts against those read, and its digest against the content's: a file whose
// rows were cut or added to, or whose bytes changed, is refused.
export const checkTrailer = (
  file: string,
  header: Header,
  counts: Trailer['rows'],
  digest: string,
  text: string,
) => {
  let trailer: Trailer | undefined
  try {
    trailer = JSON.parse(text)
  } catch {}
  if (typeof trailer?.rows !== 'object' || trailer.rows === null)
    throw new Error(`${file} ends without its trailer: it is not a complete backup`)
  for (const name of new Set([...Object.keys(counts), ...Object.keys(trailer.rows)]))
    if (counts[name] !== trailer.rows[name])
      throw new Error(
        `${file}: table ${name} has ${counts[name] ?? 0} rows, not ${trailer.rows[name] ?? 0}`,
      )
  if (header.version > 1 && trailer.sha256 !== digest)
    throw new Error(
      `${file} is damaged: its content's SHA-256 is ${digest}, not the ${trailer.sha256} it was written with`,
    )
}

// The rows' lines in `chunk`, each checked to hold the table's fields: COPY's text format separates
// them by tabs and writes a tab inside a value as \t. Returns the lines.
export const countRows = (chunk: Buffer, table: Table, before: number, file: string) => {
  let n = 0
  for (
    let start = 0, end = chunk.indexOf(10);
    end !== -1;
    start = end + 1, end = chunk.indexOf(10, start)
  ) {
    n++
    let fields = 1
    for (
      let tab = chunk.indexOf(9, start);
      tab !== -1 && tab < end;
      tab = chunk.indexOf(9, tab + 1)
    )
      fields++
    if (fields !== table.columns.length)
      throw new Error(
        `${file}: row ${before + n} of table ${table.name} has ${fields} fields, ` +
          `not its ${table.columns.length} columns`,
      )
  }
  return n
}
