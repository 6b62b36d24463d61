// The refusals of `service restore` (src/backups/dump.ts): each file made from one real small backup,
// tampered with one way, restored with --force onto a database that holds data, which must be left
// as it was, the command exiting 1 with the reason.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
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
let source: Sql
let target: string
// The backup's lines: the header, the tables' rows, the trailer last.
let lines: string[]

before(async () => {
  const from = await freshDatabase()
  dbs.push(from)
  source = connect(from.url, { max: 1 })
  await migrate(source, from.url)
  await source`insert into accounts (name, tracker_key) values ('First', 'tk-1'), ('Second', 'tk-2')`
  const made = await backup(source, join(dir, 'good.gz'))
  lines = gunzipSync(readFileSync(made.file)).toString('utf8').split('\n')
  const to = await freshDatabase()
  dbs.push(to)
  target = to.url
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

// What the target holds, read on a connection that is gone (the restore refuses a database others
// use) before this returns.
const held = async () => {
  const sql = connect(target, { max: 1 })
  let names: string[]
  try {
    names = (await sql`select name from accounts order by id`).map((r) => r.name as string)
  } finally {
    await sql.end()
  }
  const database = new URL(target).pathname.slice(1)
  for (let i = 0; ; i++) {
    const [{ n }] = await source`select count(*)::int as n from pg_stat_activity where datname = ${database}`
    if (n === 0) return names
    assert.ok(i < 100, 'a connection to the target stayed')
    await new Promise((r) => setTimeout(r, 20))
  }
}

const restoreArgs = (file: string) => ['--import', 'tsx', 'src/cli/main.ts', 'restore', '--force', file]
// The command on a pipe, or on a terminal that script(1) gives it.
const restoreCommand = (file: string, terminal = false) =>
  new Promise<{ code: number | null; out: string; err: string }>((done) => {
    const [program, args] = terminal
      ? ['script', ['-qec', [process.execPath, ...restoreArgs(file)].join(' '), '/dev/null']]
      : [process.execPath, restoreArgs(file)]
    const child = spawn(program, args, { env: { PATH: '/usr/bin:/bin', DATABASE_URL: target, LOG_LEVEL: 'warn' } })
    let [out, err] = ['', '']
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    child.on('exit', (code) => done({ code, out, err }))
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

const refused = async (file: string, reason: RegExp) => {
  const before = await held()
  const run = await restoreCommand(file)
  assert.equal(run.code, 1, run.out + run.err)
  assert.match(run.err, reason)
  assert.equal(run.out, '')
  assert.deepEqual(await held(), before)
}

test('the target holds its own data, which a restore with --force would replace', async () => {
  assert.deepEqual(await held(), ['Kept', 'Second'])
})

test('a table name that is not a plain identifier is refused before any statement names it', async () => {
  const file = tampered(
    'unsafe-name.gz',
    withHeader((h) => {
      h.tables.find((t: { name: string }) => t.name === 'accounts').name = 'accounts; drop table customers'
    }),
  )
  await refused(file, /names a table or sequence "accounts; drop table customers", not one of ours/)
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
  assert.deepEqual(await held(), ['Kept', 'Second'])
})

test('a file cut short is refused with the data kept, whether cut in its rows or in its compressed bytes', async () => {
  const accounts = lines.findIndex((line) => /\tFirst\t/.test(line))
  assert.ok(accounts > 0, 'the backup holds the first account')
  await refused(tampered('cut-rows.gz', lines.slice(0, accounts + 1).join('\n')), /ends early: it is not a complete/)
  const whole = readFileSync(join(dir, 'good.gz'))
  await refused(
    tampered('cut-bytes.gz', whole.subarray(0, Math.floor(whole.length * 0.6))),
    /is not a complete backup \(unexpected end of file\)/,
  )
  // Every table's rows but no trailer.
  await refused(tampered('no-trailer.gz', `${lines.slice(0, -2).join('\n')}\nnot json\n`), /ends without its trailer/)
})

test("a trailer whose row count is not the table's is refused", async () => {
  const trailer = JSON.parse(lines[lines.length - 2])
  assert.equal(trailer.rows.accounts, 2)
  trailer.rows.accounts = 3
  const text = [...lines.slice(0, -2), JSON.stringify(trailer), ''].join('\n')
  await refused(tampered('miscounted.gz', text), /table accounts has 2 rows, not 3/)
})

test('the untampered file restores over the data with --force, its bars on a terminal', async () => {
  const run = await restoreCommand(join(dir, 'good.gz'), true)
  assert.equal(run.code, 0, run.out + run.err)
  // The check's pass over the file, then the copy's.
  assert.match(run.out, /\d+\/\d+ bytes \| check accounts/)
  assert.match(run.out, /\d+\/\d+ bytes \| accounts/)
  assert.match(run.out, /Restored .*: \d+ rows of \d+ tables/)
  assert.deepEqual(await held(), ['First', 'Second'])
})
