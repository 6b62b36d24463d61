// src/config.ts is the one place configuration is read: its table makes the Config, `service
// --help` and the table in docs/operations.md.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ENVIRONMENT, environmentTable, loadConfig } from '../src/config.ts'

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )

test('outside src/config.ts, src/ reads the environment only to pass it on to a program', () => {
  const reads = files('src')
    .filter((f) => f !== join('src', 'config.ts'))
    .flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/process\.env\b(\.\w+)?/g)].map((m) => `${f}: ${m[0]}`),
    )
  assert.deepEqual(reads.sort(), [
    join('src', 'db', 'embedded.ts: process.env'),
    join('src', 'db', 'embedded.ts: process.env.PATH'),
  ])
})

test('--help prints every variable with its default, and docs/operations.md has the table', () => {
  assert.equal(new Set(ENVIRONMENT.map(({ name }) => name)).size, ENVIRONMENT.length)
  const help = execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', '--help'], {
    encoding: 'utf8',
  })
  for (const { name, shown } of ENVIRONMENT) assert.ok(help.includes(`(default: ${shown})`), name)
  for (const { name } of ENVIRONMENT) assert.match(help, new RegExp(`\\b${name}\\b`))
  const operations = readFileSync('docs/operations.md', 'utf8')
  assert.ok(
    operations.includes(`${environmentTable()}\n`),
    `docs/operations.md's Configuration table is not the one src/config.ts makes; paste this:\n${environmentTable()}`,
  )
})

test('an unset, empty or invalid variable takes its default; 0 is valid where the table says so', () => {
  const defaults = loadConfig({})
  assert.equal(defaults.port, 8080)
  assert.equal(defaults.databaseUrl, undefined)
  assert.equal(defaults.logLevel, 'info')
  assert.equal(defaults.webhookAllowPrivate, false)
  assert.equal(defaults.maxConnectionsPerAddress, 100)
  assert.deepEqual(
    loadConfig({
      DATABASE_URL: '',
      WORKER_CONCURRENCY: '0',
      LOG_LEVEL: 'loud',
      SERVICE_HEAVY_POOL_SIZE: '2.5',
    }),
    defaults,
  )
  const given = loadConfig({
    PORT: '0',
    DATABASE_URL: 'postgres://db/x',
    LOG_LEVEL: 'warn',
    SERVICE_WEBHOOK_ALLOW_PRIVATE: '1',
    SERVICE_WEBHOOK_RETRY_SCALE: '0.01',
    SERVICE_MAX_CONNECTIONS_PER_ADDRESS: '0',
    SERVICE_EXPENSIVE_WAITING: '0',
    WORKER_CONCURRENCY: '3',
  })
  assert.deepEqual(
    [
      given.port,
      given.databaseUrl,
      given.logLevel,
      given.webhookAllowPrivate,
      given.webhookRetryScale,
    ],
    [0, 'postgres://db/x', 'warn', true, 0.01],
  )
  assert.deepEqual(
    [given.maxConnectionsPerAddress, given.expensiveWaiting, given.workerConcurrency],
    [0, 0, 3],
  )
})

test('SERVICE_DATABASE_API_OPTIONS: name=value pairs apart by spaces; anything else stops the start', () => {
  assert.deepEqual(loadConfig({}).databaseApiOptions, {})
  assert.deepEqual(
    loadConfig({
      SERVICE_DATABASE_API_OPTIONS:
        ' citus.multi_task_query_log_level=error  statement_timeout=5s ',
    }).databaseApiOptions,
    { 'citus.multi_task_query_log_level': 'error', statement_timeout: '5s' },
  )
  for (const bad of ['statement_timeout', 'statement_timeout=', '=5s', 'a=b=c d'])
    assert.throws(
      () => loadConfig({ SERVICE_DATABASE_API_OPTIONS: bad }),
      /SERVICE_DATABASE_API_OPTIONS/,
      bad,
    )
})
