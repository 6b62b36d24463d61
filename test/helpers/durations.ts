// Loaded into each test file's process by test/run.ts: appends the file's wall time, from its
// process's start to its exit, to the file TEST_DURATIONS names (one JSON line per test file).
import { appendFileSync } from 'node:fs'
import { relative } from 'node:path'

const file = process.argv[1]
const to = process.env.TEST_DURATIONS
if (to && file?.endsWith('.test.ts')) {
  process.on('exit', () => {
    appendFileSync(
      to,
      `${JSON.stringify({ file: relative(process.cwd(), file), ms: Math.round(performance.now()) })}\n`,
    )
  })
}
