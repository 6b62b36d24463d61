// The single executable (dist/service, built by npm run build) runs with no Node on the host: with
// an empty cache it unpacks its PostgreSQL, starts the embedded database, prints the demo key,
// answers the API, serves the CLI's other commands, and leaves no process behind on SIGTERM.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { freePort } from './helpers/cluster.ts'
import { freshDatabase } from './helpers/db.ts'
import { processesUsing } from './helpers/process.ts'

const EXECUTABLE = join(process.cwd(), 'dist', 'service')
const dir = mkdtempSync(join(tmpdir(), 'service-executable-'))
// As root the server runs as the postgres user, who must be able to enter the folder.
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))

// No node anywhere on PATH: the executable must not need one.
const bare = (extra: Record<string, string>) => ({ PATH: '/nonexistent', HOME: dir, LOG_LEVEL: 'info', ...extra })

test('the executable exists and answers --help without node on PATH', () => {
  assert.ok(existsSync(EXECUTABLE), 'npm run build writes dist/service')
  const help = spawnSync(EXECUTABLE, ['--help'], { env: bare({}), encoding: 'utf8' })
  assert.equal(help.status, 0, help.stderr)
  for (const name of ['serve', 'worker', 'migrate', 'admin', 'import', 'DATABASE_URL'])
    assert.match(help.stdout, new RegExp(name))
})

test('serve on an empty cache: embedded PostgreSQL, demo key, API, clean stop', async () => {
  const [port, pgPort] = [await freePort(), await freePort()]
  const env = bare({
    PORT: String(port),
    EMBEDDED_PG_PORT: String(pgPort),
    SERVICE_CACHE_DIR: join(dir, 'cache'),
    SERVICE_DATA_DIR: join(dir, 'data'),
  })
  const child = spawn(EXECUTABLE, ['serve'], { env, cwd: dir })
  let out = ''
  child.stdout.on('data', (c) => (out += c))
  child.stderr.on('data', (c) => (out += c))
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
  try {
    const deadline = Date.now() + 90_000
    while (!/API key \(shown once\): (sk_\S+)/.test(out)) {
      assert.ok(Date.now() < deadline, `no demo key in:\n${out}`)
      assert.equal(child.exitCode, null, `exited early:\n${out}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    assert.ok(existsSync(join(dir, 'cache', 'bin', 'postgres')), 'PostgreSQL was unpacked to the cache')
    assert.match(out, /"msg":"embedded database","url":"postgres:\/\/postgres:postgres@127\.0\.0\.1:\d+\/postgres"/)
    const token = /API key \(shown once\): (sk_\S+)/.exec(out)![1]
    const base = `http://127.0.0.1:${port}`
    const headers = { 'service-key': token, 'content-type': 'application/json' }
    const upload = await fetch(`${base}/api/v1/customers`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        customers: [{ external_id: 'acme', name: 'Acme', metrics: [{ date: '2026-11-01', logins: 30 }] }],
      }),
    })
    assert.equal(upload.status, 200)
    const search = await fetch(`${base}/api/v1/customers/search`, { method: 'POST', headers, body: '{}' })
    assert.equal(search.status, 200)
  } finally {
    child.kill('SIGTERM')
  }
  assert.equal(await exited, 0, out)
  assert.deepEqual(processesUsing(join(dir, 'data')), [], 'a process was left behind')
})

test('migrate and admin commands against a DATABASE_URL', async () => {
  const db = await freshDatabase()
  try {
    const env = bare({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' })
    const migrate = spawnSync(EXECUTABLE, ['migrate'], { env, encoding: 'utf8' })
    assert.equal(migrate.status, 0, migrate.stderr)
    assert.match(migrate.stdout, /Applied 001_init\.sql/)
    const account = spawnSync(EXECUTABLE, ['admin', 'create-account', '{"name":"Exe"}'], { env, encoding: 'utf8' })
    assert.equal(account.status, 0, account.stderr)
    assert.equal(JSON.parse(account.stdout).name, 'Exe')
  } finally {
    await db.drop()
  }
})
