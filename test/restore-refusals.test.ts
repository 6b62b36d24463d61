// The refusals of `service restore` (src/backups/dump.ts): each file made from one real small
// backup, tampered with one way, restored with --force onto a database that holds data and
// without it into an empty one; both must be left as they were, the command exiting 1 with the
// reason, in bounded time.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { after, before, test } from 'node:test'
import { backup, restore } from '../src/backups/dump.ts'
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { freshDatabase } from './helpers/db.ts'

const dir = mkdtempSync(join(tmpdir(), 'service-restore-'))
const dbs: { drop: () => Promise<void> }[] = []
const KEY = 'correct horse battery staple'
let source: Sql
let target: string
// A database without the service's tables, which a refused restore must leave so.
let empty: string
// The backup's lines: the header, the tables' rows, the trailer last.
let lines: string[]

before(async () => {
  const from = await freshDatabase()
  dbs.push(from)
  source = connect(from.url, { max: 1 })
  await migrate(source, from.url)
  await source`insert into accounts (name, tracker_key)
    values ('First', 'tk-1'), ('Second', 'tk-2')`
  const made = await backup(source, join(dir, 'good.gz'))
  await backup(source, join(dir, 'good.gz.age'), { key: KEY })
  lines = gunzipSync(readFileSync(made.file)).toString('utf8').split('\n')
  const to = await freshDatabase()
  const none = await freshDatabase()
  dbs.push(to, none)
  target = to.url
  empty = none.url
  const sql = connect(target, { max: 1 })
  try {
    await restore(sql, target, made.file)
    // Unlike the backup's: a restore that went ahead would bring 'First' back.
    await sql`update accounts set name = 'Kept' where name = 'First'`
  } finally {
    await sql.end()
  }
})

after(async () => {
  await source?.end()
  for (const db of dbs) await db.drop()
  rmSync(dir, { recursive: true, force: true })
})

// Waits until no connection to `url` is left: the restore refuses a database others use.
const gone = async (url: string) => {
  const database = new URL(url).pathname.slice(1)
  for (let i = 0; ; i++) {
    const [{ n }] =
      await source`select count(*)::int as n from pg_stat_activity where datname = ${database}`
    if (n === 0) return
    assert.ok(i < 100, 'a connection to the target stayed')
    await new Promise((r) => setTimeout(r, 20))
  }
}

// What the target holds: its accounts' names and the rows of all its tables, read on a connection
// that is gone before this returns.
const held = async () => {
  const sql = connect(target, { max: 1 })
  try {
    const names = (await sql`select name from accounts order by id`).map((r) => r.name as string)
    const [{ rows }] = await sql`select sum((xpath('/row/n/text()',
        query_to_xml(format('select count(*) as n from %s', c.oid::regclass), false, true,
          '')))[1]::text::int)::int
        as rows
      from pg_class c join pg_namespace s on s.oid = c.relnamespace
      where s.nspname in ('public', 'graphile_worker') and c.relkind = 'r'
        and c.relname <> 'migrations'`
    return { names, rows }
  } finally {
    await sql.end()
    await gone(target)
  }
}

// The service's tables in the empty database: none before a refused restore, none after.
const emptyTables = async () => {
  const sql = connect(empty, { max: 1 })
  try {
    const [{ n }] = await sql`select count(*)::int as n from pg_tables where schemaname = 'public'`
    return n as number
  } finally {
    await sql.end()
    await gone(empty)
  }
}

// A refused restore ends at once: a restore that waits (an aborted transaction left
// idle) fails here.
const BOUND_MS = 60_000
interface Run {
  force?: boolean
  url?: string
  key?: string
  terminal?: boolean
}
// The command on a pipe, or on a terminal that script(1) gives it.
const restoreCommand = (
  file: string,
  { force = true, url = target, key, terminal = false }: Run = {},
) =>
  new Promise<{ code: number | null; out: string; err: string }>((done, fail) => {
    const args = [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'restore',
      ...(force ? ['--force'] : []),
      file,
    ]
    const [program, argv] = terminal
      ? ['script', ['-qec', [process.execPath, ...args].join(' '), '/dev/null']]
      : [process.execPath, args]
    const env = {
      PATH: '/usr/bin:/bin',
      DATABASE_URL: url,
      LOG_LEVEL: 'warn',
      ...(key ? { SERVICE_BACKUP_KEY: key } : {}),
    }
    const child = spawn(program, argv, { env })
    let [out, err] = ['', '']
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      fail(new Error(`the restore of ${file} did not end within ${BOUND_MS} ms:\n${out}${err}`))
    }, BOUND_MS)
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    child.on('exit', (code) => {
      clearTimeout(timer)
      done({ code, out, err })
    })
  })

const tampered = (name: string, text: string | Buffer) => {
  const file = join(dir, name)
  writeFileSync(file, typeof text === 'string' ? gzipSync(text) : text)
  return file
}
const withHeader = (change: (header: any) => void) => {
  const header = JSON.parse(lines[0])
  change(header)
  return [JSON.stringify(header), ...lines.slice(1)].join('\n')
}

// The content's lines with the trailer's digest made again for them: a file changed by someone who
// knows the format, which only the checks after the digest's can refuse.
const redigested = (content: string[]) => {
  const body = `${content.slice(0, -2).join('\n')}\n`
  const trailer = JSON.parse(content[content.length - 2])
  trailer.sha256 = createHash('sha256').update(body).digest('hex')
  return `${body}${JSON.stringify(trailer)}\n`
}

// The restore in this process, on a connection of its own that is gone when it ends.
const restoreIn = async (file: string, { force = true, url = target, key }: Run) => {
  const sql = connect(url, { max: 1 })
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, fail) => {
    timer = setTimeout(
      () => fail(new Error(`the restore of ${file} did not end within ${BOUND_MS} ms`)),
      BOUND_MS,
    )
  })
  try {
    return await Promise.race([restore(sql, url, file, { force, key }), late])
  } finally {
    clearTimeout(timer)
    await sql.end()
    await gone(url)
  }
}

const refusedOnce = async (file: string, reason: RegExp, run: Run, command: boolean) => {
  if (!command) return await assert.rejects(restoreIn(file, run), reason)
  const result = await restoreCommand(file, run)
  assert.equal(result.code, 1, result.out + result.err)
  assert.match(result.err, reason)
  assert.equal(result.out, '')
}
// Refused with --force over the target's data, and without it into the empty database: both as they
// were. The command (exit 1, the reason on stderr) where `command`, else restore() itself: each
// command starts a Node and compiles the service.
const refused = async (
  file: string,
  reason: RegExp,
  { key, command = false }: { key?: string; command?: boolean } = {},
) => {
  const before = await held()
  await refusedOnce(file, reason, { key }, command)
  assert.deepEqual(await held(), before)
  await refusedOnce(file, reason, { key, force: false, url: empty }, false)
  assert.equal(await emptyTables(), 0)
}

test('the target holds its own data, which a restore with --force would replace', async () => {
  const { names, rows } = await held()
  assert.deepEqual(names, ['Kept', 'Second'])
  assert.ok(rows > 2, `${rows} rows`)
})

test('a table name that is not a plain identifier is refused before any statement names it', async () => {
  const file = tampered(
    'unsafe-name.gz',
    withHeader((h) => {
      h.tables.find((t: { name: string }) => t.name === 'accounts').name =
        'accounts; drop table customers'
    }),
  )
  await refused(
    file,
    /names a table or sequence "accounts; drop table customers", not one of ours/,
    { command: true },
  )
})

test('a sequence name that is not a plain identifier is refused', async () => {
  const file = tampered(
    'unsafe-sequence.gz',
    withHeader((h) => {
      h.sequences[0].name = "x'); drop table accounts; --"
    }),
  )
  await refused(file, /names a table or sequence .*drop table accounts/)
})

test('a file of a newer format version is refused', async () => {
  const file = tampered(
    'newer.gz',
    withHeader((h) => {
      h.version = 3
    }),
  )
  await refused(file, /is a backup of format 3; this version reads formats 1, 2/)
})

test('a database another connection uses is refused', async () => {
  const other = connect(target, { max: 1 })
  try {
    await other`select 1`
    const run = await restoreCommand(join(dir, 'good.gz'))
    assert.equal(run.code, 1, run.out + run.err)
    assert.match(run.err, /1 other connections use the database: stop the service before a restore/)
  } finally {
    await other.end()
  }
  assert.deepEqual((await held()).names, ['Kept', 'Second'])
})

test('a file cut short is refused with the data kept, whether cut in its rows or in its compressed bytes', async () => {
  const accounts = lines.findIndex((line) => /\tFirst\t/.test(line))
  assert.ok(accounts > 0, 'the backup holds the first account')
  await refused(
    tampered('cut-rows.gz', lines.slice(0, accounts + 1).join('\n')),
    /ends early: it is not a complete/,
  )
  const whole = readFileSync(join(dir, 'good.gz'))
  await refused(
    tampered('cut-bytes.gz', whole.subarray(0, Math.floor(whole.length * 0.6))),
    /is not a complete backup \(unexpected end of file\)/,
  )
  // Every table's rows but no trailer.
  await refused(
    tampered('no-trailer.gz', `${lines.slice(0, -2).join('\n')}\nnot json\n`),
    /ends without its trailer/,
  )
})

test("a trailer whose row count is not the table's is refused", async () => {
  const trailer = JSON.parse(lines[lines.length - 2])
  assert.equal(trailer.rows.accounts, 2)
  trailer.rows.accounts = 3
  const text = [...lines.slice(0, -2), JSON.stringify(trailer), ''].join('\n')
  await refused(tampered('miscounted.gz', text), /table accounts has 2 rows, not 3/)
})

// The accounts' rows, changed by `change` (given the row's fields and the header's columns), every
// other line as it was.
const accountsTable = () =>
  JSON.parse(lines[0]).tables.find((t: { name: string }) => t.name === 'accounts')
const withAccounts = (change: (fields: string[], columns: string[]) => void, content = lines) => {
  const { columns } = accountsTable()
  return content.map((line) => {
    if (!/\t(First|Second)\t/.test(line)) return line
    const fields = line.split('\t')
    change(fields, columns)
    return fields.join('\t')
  })
}
const at = (columns: string[], name: string) => {
  const i = columns.indexOf(name)
  assert.ok(i >= 0, `accounts has no column ${name}`)
  return i
}

test('a header naming a column the schema lacks is refused, even with each row of its width', async () => {
  const header = JSON.parse(lines[0])
  accountsTable()
  header.tables.find((t: { name: string }) => t.name === 'accounts').columns.push('nickname')
  const content = withAccounts(
    (fields) => fields.push('Nick'),
    [JSON.stringify(header), ...lines.slice(1)],
  )
  await refused(
    tampered('unknown-column.gz', redigested(content)),
    /names column "nickname" of table accounts, which its migrations do not make/,
  )
})

test('a row of the wrong width is refused before the database is touched', async () => {
  const wider = withAccounts((fields) => fields.push('extra'))
  await refused(
    tampered('wider.gz', redigested(wider)),
    /row 1 of table accounts has \d+ fields, not its \d+ columns/,
  )
  const narrower = withAccounts((fields) => fields.pop())
  await refused(
    tampered('narrower.gz', redigested(narrower)),
    /row 1 of table accounts has \d+ fields/,
  )
})

test('a field COPY cannot read is refused with its table, line and column, the data as it was', async () => {
  const cases: [string, string, RegExp][] = [
    [
      'id',
      'x',
      /invalid input syntax for type bigint: "x" \(COPY accounts, line 1, column id: "x"\)/,
    ],
    ['created_at', 'yesterday-ish', /invalid input syntax for type timestamp with time zone/],
    [
      'score_alerts',
      '{"open',
      /invalid input syntax for type json.*COPY accounts, line 1, column score_alerts/s,
    ],
  ]
  for (const [column, value, reason] of cases) {
    let first = true
    const content = withAccounts((fields, columns) => {
      if (first) fields[at(columns, column)] = value
      first = false
    })
    // The command once: a COPY's error ends it, exit 1, rather than leave it waiting.
    await refused(tampered(`bad-${column}.gz`, redigested(content)), reason, {
      command: column === 'id',
    })
  }
})

test('a changed byte is refused by the digest in the trailer', async () => {
  const content = withAccounts((fields, columns) => {
    const i = at(columns, 'name')
    fields[i] = fields[i].replace('Second', 'Secomd')
  })
  await refused(
    tampered('changed.gz', content.join('\n')),
    /is damaged: its content's SHA-256 is [0-9a-f]{64}, not the/,
  )
})

test('a format 1 file, without a digest, is still restored', async () => {
  const header = JSON.parse(lines[0])
  header.version = 1
  const trailer = JSON.parse(lines[lines.length - 2])
  delete trailer.sha256
  const file = tampered(
    'format-1.gz',
    [JSON.stringify(header), ...lines.slice(1, -2), JSON.stringify(trailer), ''].join('\n'),
  )
  await restoreIn(file, { force: false, url: empty })
  const sql = connect(empty, { max: 1 })
  try {
    assert.deepEqual(
      (await sql`select name from accounts order by id`).map((r) => r.name),
      ['First', 'Second'],
    )
    await sql.unsafe('drop schema public cascade; create schema public')
  } finally {
    await sql.end()
    await gone(empty)
  }
})

test('an encrypted backup is refused without its key, with another key, or with a byte changed', async () => {
  const file = join(dir, 'good.gz.age')
  const sealed = readFileSync(file)
  assert.equal(sealed.subarray(0, 21).toString(), 'age-encryption.org/v1')
  // Nothing of the content shows through.
  assert.ok(!sealed.includes('customer-data-service backup') && !sealed.includes('tk-1'))
  await refused(
    file,
    /good\.gz\.age is encrypted: set SERVICE_BACKUP_KEY to the key it was made with/,
  )
  await refused(file, /fails authentication with SERVICE_BACKUP_KEY .*no identity matched/, {
    key: 'another key',
    command: true,
  })
  // A byte of the rows, and one of the header's MAC.
  for (const [name, offset] of [
    ['flipped-body.gz.age', sealed.length - 40],
    ['flipped-header.gz.age', 100],
  ] as const) {
    const changed = Buffer.from(sealed)
    changed[offset] ^= 1
    await refused(tampered(name, changed), /fails authentication with SERVICE_BACKUP_KEY/, {
      key: KEY,
    })
  }
  await refused(
    tampered('cut.gz.age', sealed.subarray(0, sealed.length - 20)),
    /fails authentication/,
    { key: KEY },
  )
  // With the key set, a file that is not encrypted could be anybody's.
  await refused(
    join(dir, 'good.gz'),
    /good\.gz is not encrypted, so SERVICE_BACKUP_KEY cannot authenticate it/,
    {
      key: KEY,
    },
  )
})

test('an encrypted backup restores with its key', async () => {
  const run = await restoreCommand(join(dir, 'good.gz.age'), { force: false, url: empty, key: KEY })
  assert.equal(run.code, 0, run.out + run.err)
  assert.match(run.out, /Restored .*good\.gz\.age: \d+ rows of \d+ tables/)
  const sql = connect(empty, { max: 1 })
  try {
    assert.deepEqual(
      (await sql`select name, tracker_key from accounts order by id`).map((r) => [
        r.name,
        r.tracker_key,
      ]),
      [
        ['First', 'tk-1'],
        ['Second', 'tk-2'],
      ],
    )
    await sql.unsafe('drop schema public cascade; create schema public')
  } finally {
    await sql.end()
    await gone(empty)
  }
})

test('the untampered file restores over the data with --force, its bars on a terminal', async () => {
  const run = await restoreCommand(join(dir, 'good.gz'), { terminal: true })
  assert.equal(run.code, 0, run.out + run.err)
  // The check's pass over the file, then the copy's.
  assert.match(run.out, /\d+\/\d+ bytes \| check accounts/)
  assert.match(run.out, /\d+\/\d+ bytes \| accounts/)
  assert.match(run.out, /Restored .*: \d+ rows of \d+ tables/)
  assert.deepEqual((await held()).names, ['First', 'Second'])
})
