// npm test: starts one throwaway PostgreSQL (embedded, unless TEST_DATABASE_URL is set), then runs
// node --test over the test files; each file creates its own database in that cluster.
import { spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startEmbedded } from '../src/db/embedded.ts'

const freePort = () => new Promise<number>((resolve) => {
  const server = createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number }
    server.close(() => resolve(port))
  })
})

const files = process.argv.slice(2).length
  ? process.argv.slice(2)
  : readdirSync('test').filter((f) => f.endsWith('.test.ts')).sort().map((f) => join('test', f))

let cluster: { stop: () => Promise<void> } | undefined
let dir: string | undefined
if (!process.env.TEST_DATABASE_URL) {
  dir = mkdtempSync(join(tmpdir(), 'service-test-'))
  // As root the cluster runs as the postgres user, who must be able to enter the folder.
  chmodSync(dir, 0o755)
  // Durability settings off: this cluster lives for one run and never sees a power cut.
  const pg = await startEmbedded(join(dir, 'pg'), await freePort(), [
    '-c', 'max_connections=500', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
  ])
  cluster = pg
  process.env.TEST_DATABASE_URL = pg.url
}

const child = spawn(process.execPath, [
  '--import', 'tsx', '--test', '--test-concurrency=3', '--test-timeout=300000', ...files,
], { stdio: 'inherit', env: process.env })
const code: number = await new Promise((resolve) => child.on('exit', (c) => resolve(c ?? 1)))
await cluster?.stop()
if (dir) rmSync(dir, { recursive: true, force: true })
process.exit(code)
