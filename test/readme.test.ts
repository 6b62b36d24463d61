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
