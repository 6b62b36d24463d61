// Every environment variable the service reads is in ENVIRONMENT, and so in `service --help`.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ENVIRONMENT } from '../src/config.ts'

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )

test('ENVIRONMENT names every variable read in src/, and --help prints them all', () => {
  const read = new Set(
    files('src').flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/\benv\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1])),
  )
  read.delete('PATH')
  const listed = new Set(ENVIRONMENT.map(([name]) => name))
  assert.deepEqual([...read].filter((n) => !listed.has(n)).sort(), [])
  assert.deepEqual([...listed].filter((n) => !read.has(n)).sort(), [], 'listed but never read')
  const help = execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', '--help'], { encoding: 'utf8' })
  for (const name of listed) assert.match(help, new RegExp(`\\b${name}\\b`))
  const operations = readFileSync('docs/operations.md', 'utf8')
  for (const name of listed) assert.match(operations, new RegExp(`\\b${name}\\b`), `docs/operations.md lacks ${name}`)
})
