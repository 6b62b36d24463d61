// The embedded PostgreSQL's life follows its owner's: a server found running on the data folder is
// shared while the process that started it runs, and stopped as a leftover once it is gone. Its
// superuser password is generated per data folder, and a folder made with the old fixed one moves
// to a generated one. A port already taken is named with EMBEDDED_PG_PORT, the setting
// that moves it.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { after, test } from 'node:test'
import postgres from 'postgres'
import { alive, startEmbedded } from '../src/db/embedded.ts'
import type { Log } from '../src/log.ts'
import { freePort } from './helpers/cluster.ts'
import { processesUsing } from './helpers/process.ts'

const dir = mkdtempSync(join(tmpdir(), 'service-embedded-'))
// As root the server runs as the postgres user, who must be able to enter the folder.
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))

const { NODE_TEST_CONTEXT: _, ...inherited } = process.env
const cli = (data: string, port: number) => ({
  ...inherited,
  DATABASE_URL: '',
  SERVICE_DATA_DIR: data,
  EMBEDDED_PG_PORT: String(port),
  LOG_LEVEL: 'info',
})
const answers = async (url: string) => {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    return (await sql`select 1 as one`)[0].one === 1
  } finally {
    await sql.end()
  }
}
const postmaster = (data: string) =>
  Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])

test('a command beside a running owner shares its server and leaves it running', async () => {
  const data = join(dir, 'shared')
  const pg = await startEmbedded(data, await freePort())
  try {
    const pid = postmaster(data)
    const migrate = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'migrate'], {
      env: cli(data, await freePort()),
      encoding: 'utf8',
    })
    assert.equal(migrate.status, 0, migrate.stderr)
    assert.doesNotMatch(migrate.stdout, /leftover/)
    assert.equal(postmaster(data), pid, 'the same server')
    assert.ok(await answers(pg.url), 'still running after the command')
  } finally {
    await pg.stop()
  }
})

test('a server whose owner is gone is a leftover: logged and stopped by the next start', async () => {
  const data = join(dir, 'leftover')
  const serve = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve'], {
    env: { ...cli(data, await freePort()), PORT: String(await freePort()) },
  })
  let out = ''
  serve.stdout.on('data', (c) => (out += c))
  serve.stderr.on('data', (c) => (out += c))
  const exited = new Promise((done) => serve.on('exit', done))
  const deadline = Date.now() + 90_000
  while (!out.includes('"msg":"listening"')) {
    assert.ok(Date.now() < deadline && serve.exitCode === null, `not listening:\n${out}`)
    await new Promise((r) => setTimeout(r, 200))
  }
  // Both the service and its watchdog killed: what an older service killed with SIGKILL left.
  const pid = postmaster(data)
  const watchdog = processesUsing(data).find((p) =>
    readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('service-postgres-watchdog'),
  )
  assert.ok(watchdog, 'the watchdog runs')
  process.kill(Number(watchdog), 'SIGKILL')
  serve.kill('SIGKILL')
  await exited
  assert.ok(alive(pid), 'the server outlived its owner')
  const logged: [string, Record<string, unknown> | undefined][] = []
  const log: Log = (_level, msg, fields) => logged.push([msg, fields])
  const pg = await startEmbedded(data, await freePort(), [], undefined, log)
  try {
    assert.deepEqual(logged, [['stopping a leftover embedded database', { pid, data }]])
    assert.ok(!alive(pid), 'the leftover was stopped')
    assert.notEqual(postmaster(data), pid)
    assert.ok(await answers(pg.url))
  } finally {
    await pg.stop()
  }
  assert.deepEqual(processesUsing(data), [])
})

test('the superuser password is generated per folder; the old fixed one moves to a new one', async () => {
  const data = join(dir, 'password')
  const port = await freePort()
  let pg = await startEmbedded(data, port)
  const first = readFileSync(pg.passwordFile, 'utf8').trim()
  assert.match(first, /^[0-9a-f]{48}$/)
  assert.equal(statSync(pg.passwordFile).mode & 0o777, 0o600)
  // What a folder made by an older service looks like: password `postgres`, no password file.
  const sql = postgres(pg.url, { max: 1 })
  await sql`alter role postgres password 'postgres'`
  await sql.end()
  await pg.stop()
  rmSync(pg.passwordFile)
  pg = await startEmbedded(data, port)
  try {
    assert.ok(existsSync(pg.passwordFile))
    const second = readFileSync(pg.passwordFile, 'utf8').trim()
    assert.match(second, /^[0-9a-f]{48}$/)
    assert.notEqual(second, first)
    assert.ok(await answers(pg.url))
    const old = new URL(pg.url)
    old.password = 'postgres'
    await assert.rejects(answers(old.toString()), /password authentication failed/)
  } finally {
    await pg.stop()
  }
  // A port someone else holds: the message names the setting that moves it.
  const holder = createServer().listen(port, '127.0.0.1')
  await once(holder, 'listening')
  try {
    await assert.rejects(startEmbedded(data, port), /in use: set EMBEDDED_PG_PORT to a free port/)
  } finally {
    holder.close()
  }
})
