// A generated client: types from the live /openapi.json (openapi-typescript), a small client
// written with openapi-fetch (test/client/client.ts) that must typecheck with no answer typed
// never or unknown, and that then runs against the service.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import openapiTS, { astToString } from 'openapi-typescript'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'

let s: TestService
before(async () => {
  s = await startTestService()
})
after(() => s?.stop())

test('a client generated from /openapi.json typechecks and calls the service', async () => {
  const doc = (await s.call('GET', '/openapi.json')).body
  const types = astToString(await openapiTS(doc))
  assert.doesNotMatch(types, /Record<string, never>\s*\|\s*undefined;\s*\n\s*};\s*\n\s*responses/)
  mkdirSync('test/client/generated', { recursive: true })
  writeFileSync('test/client/generated/schema.ts', types)

  const tsc = spawnSync(
    process.execPath,
    ['node_modules/typescript/bin/tsc', '-p', 'test/client/tsconfig.json'],
    {
      encoding: 'utf8',
    },
  )
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr)

  const account = await scoredAccount(s)
  // Imported by URL so that the repository's typecheck does not follow it before the types exist.
  const { run } = await import(new URL('./client/client.ts', import.meta.url).href)
  const out = await run(s.base, account.token, ADMIN_TOKEN, account.id)
  assert.equal(out.upload.status, 'received')
  assert.equal(out.status?.status, 'processed')
  assert.deepEqual(
    out.search?.results.map((c: any) => [c.id, c.properties.country]),
    [['gen-1', 'US']],
  )
  assert.equal(typeof out.customer?.upsell_score, 'number')
  assert.ok(out.customer?.score_explanation)
  assert.equal(out.typo.status, 400)
  assert.equal(out.typo.error?.errors?.[0].path, '/filter')
  assert.equal(out.hook.status, 201, JSON.stringify(out.hook.error))
  assert.match(out.hook.data!.secret, /^whsec_/)
})
