// The operator's second day (issue 35): what an interrupted or refused import says, and
// the owners hint.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { scoredAccount } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const dir = mkdtempSync(join(tmpdir(), 'second-day-'))
let s: TestService
before(async () => {
  s = await startTestService({}, { http: true, worker: false })
})
after(async () => {
  await s.stop()
  rmSync(dir, { recursive: true, force: true })
})

const fileAccount = async (name: string) => {
  const account = await scoredAccount(s, name)
  await s.sql`update accounts set source_of_truth = 'FILE' where id = ${account.id}`
  return account
}

// `service import` as its own process; `whenRunning` is called once it has written its first chunk.
const runImport = async (
  args: string[],
  whenRunning?: (kill: (signal: NodeJS.Signals) => void) => Promise<void>,
) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'import', ...args], {
    env: { ...process.env, DATABASE_URL: s.url, LOG_LEVEL: 'error' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  const exited = once(child, 'exit')
  await whenRunning?.((signal) => child.kill(signal))
  const [code] = (await exited) as [number | null]
  return { code, stdout, stderr }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  test(`an import stopped by ${signal} writes what it read, says where it stopped, and exits 2`, async () => {
    const account = await fileAccount(`Stopped ${signal}`)
    const ROWS = 60_000
    const file = join(dir, `${signal}.csv`)
    let text = 'external_id,name,country\n'
    for (let i = 1; i <= ROWS; i++) text += `s${i},Customer ${i},US\n`
    writeFileSync(file, text)
    const count = async () =>
      (await s.sql`select count(*)::int as n from customers where account_id = ${account.id}`)[0]
        .n as number
    const run = await runImport(
      ['customers', file, '--account', String(account.id)],
      async (kill) => {
        for (let i = 0; (await count()) === 0; i++) {
          assert.ok(i < 600, 'no chunk was written')
          await new Promise((r) => setTimeout(r, 50))
        }
        kill(signal)
      },
    )
    assert.equal(run.code, 2, run.stderr)
    const stopped = new RegExp(
      `^Import stopped by ${signal} after line (\\d+); the lines after it were not read\\.\\n` +
        'Read (\\d+) rows before it stopped: (\\d+) imported \\(\\d+ created, 0 updated\\), 0 with errors skipped',
    ).exec(run.stdout)
    assert.ok(stopped, run.stdout)
    const [line, read, imported] = stopped.slice(1).map(Number)
    assert.ok(read < ROWS, `stopped before the end: ${run.stdout}`)
    // Every row read was written: the file can be resumed after the line named.
    assert.equal(line, read + 1)
    assert.equal(imported, read)
    assert.equal(await count(), imported)
  })
}

test('the summary says owners must exist as users, naming service admin add-user', async () => {
  const account = await fileAccount('Owners')
  const file = join(dir, 'owners.csv')
  writeFileSync(
    file,
    'external_id,name,owner_email\no1,One,owner@acme.test\no2,Two,nobody@acme.test\n',
  )
  const run = await runImport(['customers', file, '--account', String(account.id)])
  assert.equal(run.code, 0, run.stderr)
  assert.match(run.stdout, /^Read 2 rows: 2 imported .*1 warnings \(unknown owner emails\)/m)
  assert.match(
    run.stdout,
    /1 rows named an owner email that is no user of account \d+.*service admin add-user/,
  )
})
