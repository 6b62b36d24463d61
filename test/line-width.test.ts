// Biome formats at 100 columns but does not break template literals, string literals or comments,
// so a long SQL line or message would slip past `biome format`. Those are held near 100 by hand;
// this keeps every line of the source, the tests, the benchmarks and the build script at 120
// characters or fewer, a hard limit for what is left over (a message or test name that would read
// worse broken), tracked files and new ones git does not ignore alike; and under 1% of the lines of
// src/ past 100, where the model codebases stand (issue 46).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const MAX = 120
const NEAR = 100
const NEAR_SHARE = 0.01
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const PATHSPECS = ['src/*.ts', 'test/*.ts', 'bench/*.ts', '*.mjs']

const gitFiles = (...args: string[]) =>
  execFileSync('git', ['ls-files', '-z', ...args, '--', ...PATHSPECS], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter(Boolean)

const files = () =>
  [...new Set([...gitFiles(), ...gitFiles('--others', '--exclude-standard')])]
    .filter((f) => existsSync(join(ROOT, f)))
    .sort()
const widths = (file: string) =>
  readFileSync(join(ROOT, file), 'utf8')
    .split(/\r?\n/)
    .map((line) => [...line].length)

test(`under ${NEAR_SHARE * 100}% of the lines of src/ are over ${NEAR} characters`, () => {
  const all = files()
    .filter((f) => f.startsWith('src/'))
    .flatMap(widths)
  const over = all.filter((w) => w > NEAR).length
  assert.ok(all.length > 10_000, `${all.length} lines read`)
  assert.ok(
    over < all.length * NEAR_SHARE,
    `${over} of ${all.length} lines over ${NEAR} characters`,
  )
})

test(`every line of src/, test/, bench/ and *.mjs is at most ${MAX} characters`, () => {
  const listed = files()
  assert.ok(
    listed.includes('build.mjs') && listed.includes('test/line-width.test.ts'),
    listed.join('\n'),
  )
  const long = listed.flatMap((file) =>
    widths(file).flatMap((width, i) =>
      width > MAX ? [`${file}:${i + 1}: ${width} characters`] : [],
    ),
  )
  assert.deepEqual(long, [], `lines over ${MAX} characters:\n${long.join('\n')}`)
})
