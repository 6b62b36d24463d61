import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freshDatabase } from './helpers/db.ts'

// npm test builds dist/service.mjs first; here it runs alone in a folder with no node_modules.
const bundle = () => {
  assert.ok(existsSync('dist/service.mjs'), 'dist/service.mjs is missing: run npm run build')
  const dir = mkdtempSync(join(tmpdir(), 'service-bundle-'))
  copyFileSync('dist/service.mjs', join(dir, 'service.mjs'))
  assert.deepEqual(readdirSync(dir), ['service.mjs'])
  return dir
}

test('the single-file bundle serves /readyz against a database and drains on SIGTERM', async () => {
  const dir = bundle()
  const db = await freshDatabase()
  try {
    const child = spawn(process.execPath, ['service.mjs', 'serve'], {
      cwd: dir,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1' },
    })
    let out = ''
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        out += d
        const m = /"msg":"listening","port":(\d+)/.exec(out)
        if (m) resolve(Number(m[1]))
      })
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)))
    })
    const res = await fetch(`http://127.0.0.1:${port}/readyz`)
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { status: 'ready' })
    const code = await new Promise((resolve) => {
      child.on('exit', resolve)
      child.kill('SIGTERM')
    })
    assert.equal(code, 0)
    assert.match(out, /"msg":"request".*"path":"\/readyz","status":200/)
  } finally {
    await db.drop()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the bundle runs migrate and admin operations from the command line', async () => {
  const dir = bundle()
  const db = await freshDatabase()
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['service.mjs', ...args], {
      cwd: dir,
      encoding: 'utf8',
      env: { PATH: process.env.PATH, DATABASE_URL: db.url },
    })
  try {
    const migrated = run('migrate')
    assert.equal(migrated.status, 0, migrated.stderr)
    assert.match(migrated.stdout, /Applied 001_init\.sql/)
    assert.match(run('migrate').stdout, /Nothing to apply/)
    const created = run('admin', 'create-account', '{"name":"Cli Co"}')
    assert.equal(created.status, 0, created.stderr)
    const account = JSON.parse(created.stdout)
    assert.equal(account.name, 'Cli Co')
    const key = run('admin', 'create-key', '--id', String(account.id), '{"scopes":["search"]}')
    assert.equal(key.status, 0, key.stderr)
    assert.match(JSON.parse(key.stdout).token, /^sk_/)
    const bad = run('admin', 'create-account', '{}')
    assert.equal(bad.status, 1)
    assert.equal(JSON.parse(bad.stderr).errors[0].path, '/name')
    assert.equal(run('admin', 'get-account').status, 2)
    const help = run('admin', '--help')
    assert.match(help.stdout, /create-account/)
    assert.match(run('--help').stdout, /serve/)
  } finally {
    await db.drop()
    rmSync(dir, { recursive: true, force: true })
  }
})
