// Logs go to stderr, so that stdout holds only a command's answer: `service admin list-accounts |
// jq .` works. Run on the embedded database, whose start is logged at info. (test/import.test.ts
// reads the summary of `service import` from stdout.)
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { freePort } from './helpers/cluster.ts'

const dir = mkdtempSync(join(tmpdir(), 'service-cli-'))
// As root the server runs as the postgres user, who must be able to enter the folder.
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))

const { NODE_TEST_CONTEXT: _, ...inherited } = process.env
const port = await freePort()
const service = (...args: string[]) => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    env: {
      ...inherited,
      DATABASE_URL: '',
      SERVICE_DATA_DIR: join(dir, 'pg'),
      EMBEDDED_PG_PORT: String(port),
      LOG_LEVEL: 'info',
    },
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stderr, /"msg":"embedded database"/, 'the log is on stderr')
  return run.stdout
}

test('`service admin list-accounts` prints its JSON answer alone on stdout', () => {
  assert.equal(JSON.parse(service('admin', 'create-account', '{"name":"Piped"}')).name, 'Piped')
  const listed = JSON.parse(service('admin', 'list-accounts'))
  assert.deepEqual(
    listed.map((a: { name: string }) => a.name),
    ['Piped'],
  )
})
