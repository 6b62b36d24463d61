// The test runner's throwaway cluster on a pinned port: TEST_POSTGRES_PORT (docs/testing.md).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import postgres from 'postgres'
import { freePort, pinnedPort, startThrowawayCluster } from './helpers/cluster.ts'

test('TEST_POSTGRES_PORT: a port number, or unset for a free port', () => {
  assert.equal(pinnedPort({}), undefined)
  assert.equal(pinnedPort({ TEST_POSTGRES_PORT: '' }), undefined)
  assert.equal(pinnedPort({ TEST_POSTGRES_PORT: '54329' }), 54329)
  for (const wrong of ['0', '65536', '5432x', '05432', ' 5432', '-1'])
    assert.throws(
      () => pinnedPort({ TEST_POSTGRES_PORT: wrong }),
      /TEST_POSTGRES_PORT must be a port number/,
      wrong,
    )
})

test('test/run.ts stops at once on a wrong TEST_POSTGRES_PORT, before starting anything', () => {
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'test/run.ts', 'test/cluster.test.ts'],
    {
      env: { ...process.env, TEST_POSTGRES_PORT: 'five' },
      encoding: 'utf8',
    },
  )
  assert.notEqual(run.status, 0)
  assert.match(run.stderr, /TEST_POSTGRES_PORT must be a port number, 1 to 65535, not "five"/)
})

test('the throwaway cluster listens on the pinned port', async () => {
  const port = await freePort()
  const cluster = await startThrowawayCluster(
    'service-cluster-test-',
    [],
    undefined,
    pinnedPort({ TEST_POSTGRES_PORT: `${port}` }),
  )
  try {
    assert.equal(new URL(cluster.url).port, String(port))
    const sql = postgres(cluster.url, { max: 1, onnotice: () => {} })
    const [{ port: listening }] = await sql`select current_setting('port')::int as port`
    await sql.end()
    assert.equal(listening, port)
  } finally {
    await cluster.stop()
  }
})
