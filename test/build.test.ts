import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freshDatabase } from './helpers/db.ts'
import { bundleAlone, serveBundle } from './helpers/bundle.ts'

test('the single-file bundle serves /readyz against a database and drains on SIGTERM', async () => {
  const bundle = await serveBundle()
  try {
    const res = await fetch(`${bundle.base}/readyz`)
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { status: 'ready' })
  } finally {
    assert.equal(await bundle.stop(), 0)
  }
  assert.match(bundle.output(), /"msg":"request".*"path":"\/readyz","status":200/)
})

test('the bundle runs migrate and admin operations from the command line', async () => {
  const dir = bundleAlone()
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

// The TypeScript compiler was 10 MB of the bundle and 45 MB of every process's memory at idle
// (build.mjs); graphile-worker would only need it for a TypeScript config file of its own.
test('the bundle leaves out the TypeScript compiler and says so when a TypeScript config file asks for it', () => {
  assert.ok(!readFileSync('dist/service.mjs', 'utf8').includes('versionMajorMinor'))
  const dir = bundleAlone()
  try {
    const help = spawnSync(process.execPath, ['service.mjs', '--help'], {
      cwd: dir,
      encoding: 'utf8',
    })
    assert.equal(help.status, 0, help.stderr)
    writeFileSync(join(dir, '.graphile-workerrc.ts'), 'export default {}\n')
    const run = spawnSync(process.execPath, ['service.mjs', '--help'], {
      cwd: dir,
      encoding: 'utf8',
    })
    assert.notEqual(run.status, 0)
    assert.match(run.stderr, /does not read TypeScript config files/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

// V8 holds a script with any character past Latin-1 as two bytes a character: the 5 MB bundle
// would take 11 MB of every process's heap instead of 5 (build.mjs).
test('the bundles are ASCII', () => {
  for (const file of ['dist/service.mjs', 'dist/sea/main.cjs']) {
    const text = readFileSync(file, 'latin1')
    const at = text.search(/[^\x00-\x7f]/)
    assert.equal(at, -1, `${file} has a character past ASCII: ${text.slice(at - 40, at + 40)}`)
  }
})

// dist/build.log is all that npm run build's tools printed (build.mjs shows it less the lines that
// begin as docs/operations.md lists under "The single executable", each with its explanation).
test('the build printed no line that docs/operations.md does not explain', () => {
  assert.ok(existsSync('dist/build.log'), 'dist/build.log is missing: run npm run build')
  const docs = readFileSync('docs/operations.md', 'utf8')
  const list = docs.slice(docs.indexOf('finds no other line in that log')).split('\n\n')[1]
  const explained = [...list.matchAll(/^- `([^`]+)`: /gm)].map((m) => m[1])
  // build.mjs holds back the lines that begin as the list says, and no others.
  const build = readFileSync('build.mjs', 'utf8')
  const start = build.indexOf('const EXPLAINED = [')
  const held = build.slice(start, build.indexOf('\n]\n', start))
  assert.deepEqual(
    [...held.matchAll(/^ {2}(['"])(.+)\1,$/gm)].map((m) => m[2]),
    explained,
  )
  const lines = readFileSync('dist/build.log', 'utf8').split('\n').filter(Boolean)
  assert.deepEqual(
    lines.filter((line) => !explained.some((begins) => line.startsWith(begins))),
    [],
  )
})
