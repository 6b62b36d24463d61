// npm test: starts one throwaway PostgreSQL (embedded, unless TEST_DATABASE_URL is set), then runs
// node --test over the test files; each file creates its own database in that cluster. A whole run
// then runs the integration files once more on the oldest supported PostgreSQL when this machine
// has it (Debian 12's PostgreSQL 15 in its usual place; SERVICE_TEST_POSTGRES_HOME names another
// installation, 'none' skips it), and then, with the tenant-route files, on a Citus cluster of
// three nodes that it starts when the machine has Citus for that PostgreSQL
// (SERVICE_TEST_CITUS=none skips it; =1 runs the named files there alone). At the end it prints
// each file's wall time, slowest first, and writes them to test/artifacts/durations.json.
import { spawn, spawnSync } from 'node:child_process'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import {
  CITUS_HOME,
  CITUS_MIN_MINOR,
  citusMissing,
  serverMinor,
  startCitusCluster,
} from './helpers/citus.ts'
import { pinnedPort, startThrowawayCluster } from './helpers/cluster.ts'

// Arguments that start with -- go to node --test (--test-name-pattern=..., --test-only); the others
// name the files to run, all of them when none does.
const args = process.argv.slice(2)
const flags = args.filter((a) => a.startsWith('--'))
const named = args.filter((a) => !a.startsWith('--'))
const all = readdirSync('test')
  .filter((f) => f.endsWith('.test.ts'))
  .sort()
  .map((f) => join('test', f))
// test/citus-*.test.ts need a Citus cluster: they run in the Citus pass only.
const citusOnly = (file: string) => /(^|\/)citus-[^/]*\.test\.ts$/.test(file)
const files = (named.length ? named : all).filter((f) => !citusOnly(f))

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

// Read before anything starts, so that a wrong value stops the run at once.
const port = pinnedPort()
const scratch = mkdtempSync(join(tmpdir(), 'service-test-durations-'))
const runs: { run: string; seconds: number; files: { file: string; seconds: number | null }[] }[] =
  []

// The Citus pass: the cluster's nodes for test/helpers/db.ts, and service-api connections that fail
// any statement touching more than one shard.
const startCitus = async () => {
  const cluster = await startCitusCluster().catch((err) => {
    throw new Error(`the Citus cluster did not start: ${err.message}`)
  })
  const env = {
    ...cluster.env,
    SERVICE_DATABASE_API_OPTIONS: 'citus.multi_task_query_log_level=error',
  }
  return { env, stop: cluster.stop }
}

type Target = { url?: string; home?: string; citus?: boolean }
const runTests = async (run: string, testFiles: string[], { url, home, citus }: Target = {}) => {
  const started = performance.now()
  const durations = join(scratch, `${runs.length}.jsonl`)
  writeFileSync(durations, '')
  const cluster = url
    ? undefined
    : citus
      ? await startCitus()
      : await startThrowawayCluster('service-test-', SETTINGS, home, port)
  const env = cluster && 'env' in cluster ? cluster.env : { TEST_DATABASE_URL: url ?? cluster!.url }
  const child = spawn(
    process.execPath,
    [
      ...['--import', 'tsx', '--import', './test/helpers/durations.ts'],
      ...['--test', '--test-concurrency=3', '--test-timeout=300000', ...flags, ...testFiles],
    ],
    { stdio: 'inherit', env: { ...process.env, ...env, TEST_DURATIONS: durations } },
  )
  const code: number = await new Promise((resolve) => child.on('exit', (c) => resolve(c ?? 1)))
  await cluster?.stop()
  const ms = new Map<string, number>()
  for (const line of readFileSync(durations, 'utf8').split('\n').filter(Boolean)) {
    const { file, ms: took } = JSON.parse(line)
    ms.set(file, took)
  }
  // A file killed before it could exit (a timeout, a crash) has no time: listed first, as null.
  const files = testFiles
    .map((file) => relative('.', resolve(file)))
    .map((file) => ({ file, seconds: ms.has(file) ? ms.get(file)! / 1000 : null }))
    .sort((a, b) => (b.seconds ?? Infinity) - (a.seconds ?? Infinity))
  runs.push({ run, seconds: (performance.now() - started) / 1000, files })
  return code
}

const printDurations = () => {
  for (const { run, seconds, files } of runs) {
    process.stdout.write(
      `\n# Wall time of each test file (${run}), slowest first; ${seconds.toFixed(1)} s in all\n`,
    )
    for (const { file, seconds } of files) {
      process.stdout.write(
        `# ${seconds === null ? '     -' : seconds.toFixed(1).padStart(6)} s  ${file}\n`,
      )
    }
  }
  mkdirSync(join('test', 'artifacts'), { recursive: true })
  writeFileSync(join('test', 'artifacts', 'durations.json'), `${JSON.stringify(runs, null, 2)}\n`)
  rmSync(scratch, { recursive: true, force: true })
}

// The files whose assertions depend on the server: SQL semantics, migrations, the set-based jobs.
const INTEGRATION = [
  'audit',
  'dates',
  'migrate',
  'scoring-sql',
  'scoring.integration',
  'search',
  'search-compiler',
  'search-property',
  'strict',
  'tracking',
  'uploads',
  'webhooks',
].map((name) => join('test', `${name}.test.ts`))
// The Citus pass runs these too: they drive the tenant routes and jobs over HTTP, so that every
// statement of a service-key request is shown to touch one shard. Chosen for the distinct route
// families they reach, within the 20 minutes of npm test; relay and the crash and outage files are
// left out for time (docs/testing.md, "The Citus pass").
const TENANT_ROUTES = [
  'aborted',
  'aggregate',
  'audit-erasure',
  'churn-model',
  'contract',
  'events',
  'isolation',
  'privacy',
  'segments',
  'sign-in',
  'sso',
  'tracking-apply',
  'upload-failures',
  'week',
].map((name) => join('test', `${name}.test.ts`))
const olderHome = process.env.SERVICE_TEST_POSTGRES_HOME ?? '/usr/lib/postgresql/15'

const citusSetting = process.env.SERVICE_TEST_CITUS
const first = process.env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : 'embedded PostgreSQL'
const mainFiles = citusSetting === '1' ? [] : files
let code = mainFiles.length
  ? await runTests(first, mainFiles, { url: process.env.TEST_DATABASE_URL })
  : 0
const whole = named.length === 0 && !process.env.TEST_DATABASE_URL
if (code === 0 && whole && olderHome !== 'none' && existsSync(join(olderHome, 'bin', 'postgres'))) {
  process.stdout.write(`# The integration files again, on the PostgreSQL in ${olderHome}\n`)
  code = await runTests(`integration files, ${olderHome}`, INTEGRATION, { home: olderHome })
}

// Citus from ../shared/citus/install.sh when this machine has it and the run may install it (root),
// and, as root, Debian's newer PostgreSQL 15 when the one installed is too old for that build (the
// browser tests install chromium the same way). Whatever fails here only skips the
// pass, saying why.
const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
const apt = (...args: string[]) =>
  spawnSync('apt-get', args, { stdio: 'ignore', env: aptEnv }).status === 0
const citusWhyNot = () => {
  const root = process.getuid?.() === 0
  const install = resolve('..', 'shared', 'citus', 'install.sh')
  if (citusMissing() && root && existsSync(install)) spawnSync(install, { stdio: 'ignore' })
  const tooOld = () =>
    existsSync(join(CITUS_HOME, 'lib', 'citus.so')) && serverMinor() < CITUS_MIN_MINOR
  // A package list that does not know the newer release installs nothing: fetched,
  // then tried again.
  if (root && tooOld() && (!apt('install', '-y', 'postgresql-15') || tooOld())) {
    apt('update') && apt('install', '-y', 'postgresql-15')
  }
  return citusMissing()
}
// The whole run's integration, tenant-route and Citus-only files, or the files named (all of them
// with SERVICE_TEST_CITUS=1, else the Citus-only ones).
const citusFiles = whole
  ? [...INTEGRATION, ...TENANT_ROUTES, ...all.filter(citusOnly)]
  : named.filter((f) => citusSetting === '1' || citusOnly(f))
if (code === 0 && citusFiles.length && citusSetting !== 'none') {
  const why = citusWhyNot()
  if (why) process.stdout.write(`# The Citus pass is skipped: ${why}\n`)
  else {
    process.stdout.write(
      `# The integration and tenant-route files again, on a Citus cluster (${CITUS_HOME}, 3 nodes)\n`,
    )
    code = await runTests('Citus cluster', citusFiles, { citus: true })
  }
} else if (code === 0 && whole)
  process.stdout.write('# The Citus pass is skipped: SERVICE_TEST_CITUS=none\n')
printDurations()
process.exit(code)
