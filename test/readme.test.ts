import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freshDatabase } from './helpers/db.ts'
import { ADMIN_TOKEN } from './helpers/service.ts'
import { startProcess } from './helpers/process.ts'
import { freePort } from './helpers/cluster.ts'
import { routes } from '../src/api/routes.ts'

// The README's walkthrough block, run as written by bash against a fresh service.
const walkthrough = () => {
  const readme = readFileSync('README.md', 'utf8')
  const m = /<!-- walkthrough -->\n```sh\n([\s\S]*?)\n```/.exec(readme)
  assert.ok(m, 'README.md has no walkthrough block')
  return m[1]
}

test("the README's five-minute walkthrough works as written", async () => {
  const db = await freshDatabase()
  const serve = await startProcess(['serve'], db.url)
  const dir = mkdtempSync(join(tmpdir(), 'service-readme-'))
  try {
    const run = spawnSync('bash', ['-e', '-c', walkthrough()], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 120_000,
      env: {
        PATH: process.env.PATH,
        BASE: serve.base,
        SERVICE_ADMIN_TOKEN: ADMIN_TOKEN,
        HOOKS_PORT: String(await freePort()),
      },
    })
    assert.equal(run.status, 0, `walkthrough failed:\n${run.stdout}\n${run.stderr}`)
    const search = /\{"results":\[.*?\]\}/.exec(run.stdout)
    assert.ok(search, `no search answer in:\n${run.stdout}`)
    const results = JSON.parse(search[0]).results
    assert.deepEqual(
      results.map((r: { id: string }) => r.id),
      ['acme'],
      'only acme has a positive engagement score',
    )
    assert.equal(results[0].engagementscore, 50)
    assert.match(run.stdout, /^signature ok$/m, 'the walkthrough verifies the webhook signature')
    const typo = /\{"type":"about:blank","title":"Bad Request".*?\}\]\}/.exec(run.stdout)
    assert.ok(typo, `no error answer in:\n${run.stdout}`)
    assert.equal(JSON.parse(typo[0]).errors[0].path, '/filter')
    // The README quotes that answer's message as it is today.
    const quoted = /Step 6 shows[^`]*```json\n([\s\S]*?)\n```/.exec(
      readFileSync('README.md', 'utf8'),
    )
    assert.ok(quoted, 'README quotes step 6')
    assert.equal(
      JSON.parse(quoted[1].replace(/\n\s*/g, ' ')).errors[0].message,
      JSON.parse(typo[0]).errors[0].message,
    )
    const hook = /\{"event":"customer\.created".*?"batch":\{[^}]*\}\}\}/.exec(run.stdout)
    assert.ok(hook, `no webhook in:\n${run.stdout}`)
    assert.deepEqual(
      JSON.parse(hook[0]).data.customers.map((c: { external_id: string }) => c.external_id),
      ['acme', 'globex'],
    )
  } finally {
    await serve.kill('SIGTERM')
    await db.drop()
    rmSync(dir, { recursive: true, force: true })
  }
})

// The README names path parameters as the routing table does ({upload_id}, not {id}), says which
// Node the executable carries, and what npm test installs.
test('the README names path parameters as the API does, and what npm test needs', () => {
  const readme = readFileSync('README.md', 'utf8')
  // uploads/{upload_id} and accounts[/{id}] must be segments of some route's path.
  for (const [, segment, name] of readme.matchAll(/(\w+)\[?\/\{(\w+)\}/g))
    assert.ok(
      routes.some((r) => r.path.includes(`/${segment}/:${name}`)),
      `${segment}/{${name}} is no route's`,
    )
  const tests = readme.slice(readme.indexOf('## Tests'), readme.indexOf('## Documentation'))
  const node = /const EXECUTABLE_NODE = '([\d.]+)'/.exec(readFileSync('build.mjs', 'utf8'))![1]
  assert.ok(tests.includes(`Node ${node}`), `README's Tests name Node ${node}`)
  for (const needed of [
    'npm pack',
    'apt-get',
    'chromium',
    'PostgreSQL 15',
    'node --import tsx test/run.ts test/',
  ])
    assert.ok(tests.includes(needed), needed)
})
