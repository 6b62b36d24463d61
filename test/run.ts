// npm test: starts one throwaway PostgreSQL (embedded, unless TEST_DATABASE_URL is set), then runs
// node --test over the test files; each file creates its own database in that cluster. A whole run
// then runs the integration files once more on the oldest supported PostgreSQL when this machine
// has it (Debian 12's PostgreSQL 15 in its usual place; SERVICE_TEST_POSTGRES_HOME names another
// installation, 'none' skips it).
import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { startThrowawayCluster } from './helpers/cluster.ts'

const files = process.argv.slice(2).length
  ? process.argv.slice(2)
  : readdirSync('test')
      .filter((f) => f.endsWith('.test.ts'))
      .sort()
      .map((f) => join('test', f))

// Durability settings off: this cluster lives for one run and never sees a power cut.
const SETTINGS = [
  '-c',
  'max_connections=500',
  '-c',
  'fsync=off',
  '-c',
  'synchronous_commit=off',
  '-c',
  'full_page_writes=off',
]

const runTests = async (testFiles: string[], url?: string, home?: string) => {
  const cluster = url ? undefined : await startThrowawayCluster('service-test-', SETTINGS, home)
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-concurrency=3', '--test-timeout=300000', ...testFiles],
    { stdio: 'inherit', env: { ...process.env, TEST_DATABASE_URL: url ?? cluster!.url } },
  )
  const code: number = await new Promise((resolve) => child.on('exit', (c) => resolve(c ?? 1)))
  await cluster?.stop()
  return code
}

// The files whose assertions depend on the server: SQL semantics, migrations, the set-based jobs.
const INTEGRATION = [
  'dates',
  'migrate',
  'scoring-sql',
  'scoring.integration',
  'search',
  'search-property',
  'strict',
  'tracking',
  'uploads',
  'webhooks',
].map((name) => join('test', `${name}.test.ts`))
const olderHome = process.env.SERVICE_TEST_POSTGRES_HOME ?? '/usr/lib/postgresql/15'

let code = await runTests(files, process.env.TEST_DATABASE_URL)
const whole = process.argv.length <= 2 && !process.env.TEST_DATABASE_URL
if (code === 0 && whole && olderHome !== 'none' && existsSync(join(olderHome, 'bin', 'postgres'))) {
  process.stdout.write(`# The integration files again, on the PostgreSQL in ${olderHome}\n`)
  code = await runTests(INTEGRATION, undefined, olderHome)
}
process.exit(code)
