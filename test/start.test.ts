// npm start forwards SIGTERM and SIGINT to the service and leaves no child behind: neither a node
// process nor the embedded PostgreSQL; serve logs one line naming the signal.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { freePort } from './helpers/cluster.ts'
import { processesUsing } from './helpers/process.ts'

const dir = mkdtempSync(join(tmpdir(), 'service-start-'))
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`npm start stops on ${signal} with no process left`, async () => {
    const data = join(dir, `data-${signal}`)
    const [port, pgPort] = [await freePort(), await freePort()]
    const { NODE_TEST_CONTEXT: _, ...inherited } = process.env
    const child = spawn('npm', ['start', '--silent'], {
      env: {
        ...inherited,
        DATABASE_URL: '',
        SERVICE_DATA_DIR: data,
        PORT: String(port),
        EMBEDDED_PG_PORT: String(pgPort),
      },
    })
    let out = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (out += c))
    const exited = new Promise<void>((done) => child.on('exit', () => done()))
    try {
      const deadline = Date.now() + 90_000
      while (!out.includes('"msg":"listening"')) {
        assert.ok(Date.now() < deadline && child.exitCode === null, `not listening:\n${out}`)
        await new Promise((r) => setTimeout(r, 200))
      }
      assert.ok(processesUsing(data).length >= 2, 'the service and PostgreSQL run')
    } finally {
      child.kill(signal)
    }
    await exited
    for (let tries = 0; processesUsing(data).length && tries < 50; tries++)
      await new Promise((r) => setTimeout(r, 100))
    assert.deepEqual(processesUsing(data), [], `left behind:\n${out}`)
    // One line says it stopped, and why.
    assert.match(out, new RegExp(`"msg":"stopped","command":"serve","reason":"${signal}"`))
  })
}
