// The console's response types are generated from the OpenAPI document (src/api/openapi-types.ts);
// a schema changed without `npm run openapi-types` fails here, before the console reads a shape
// the service no longer answers with.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { CONSOLE_TYPES, consoleTypes } from '../src/api/openapi-types.ts'

test(`${CONSOLE_TYPES} is what \`npm run openapi-types\` generates`, async () => {
  const committed = readFileSync(new URL(`../${CONSOLE_TYPES}`, import.meta.url), 'utf8')
  assert.ok(
    committed === (await consoleTypes()),
    `${CONSOLE_TYPES} is stale: run \`npm run openapi-types\``,
  )
})
