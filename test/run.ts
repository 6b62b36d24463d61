// npm test: starts one throwaway PostgreSQL (embedded, unless TEST_DATABASE_URL is set), then runs
// node --test over the test files; each file creates its own database in that cluster.
import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { startThrowawayCluster } from './helpers/cluster.ts'

const files = process.argv.slice(2).length
  ? process.argv.slice(2)
  : readdirSync('test')
      .filter((f) => f.endsWith('.test.ts'))
      .sort()
      .map((f) => join('test', f))

// Durability settings off: this cluster lives for one run and never sees a power cut.
const cluster = process.env.TEST_DATABASE_URL
  ? undefined
  : await startThrowawayCluster('service-test-', [
      '-c',
      'max_connections=500',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
    ])
if (cluster) process.env.TEST_DATABASE_URL = cluster.url

const child = spawn(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=3', '--test-timeout=300000', ...files],
  { stdio: 'inherit', env: process.env },
)
const code: number = await new Promise((resolve) => child.on('exit', (c) => resolve(c ?? 1)))
await cluster?.stop()
process.exit(code)
