import { test } from 'node:test'
import { spawnSync } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { once } from 'node:events'
import { startTestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'

test('scratch', async () => {
  const s = await startTestService({}, { http: true, worker: false })
  const a = await scoredAccount(s)
  await s.sql`update accounts set source_of_truth = 'FILE' where id = ${a.id}`
  const ROWS = Number(process.env.ROWS ?? 20000)
  const out = createWriteStream('/tmp/scratch.csv')
  let text = 'external_id,name,owner_email,country,has_sso,plan_started,date,logins,seats\n'
  for (let line = 2; line <= ROWS + 1; line++) {
    text += `c${line},Customer ${line},${line % 2 ? 'owner@acme.test' : ''},${line % 3 ? 'US' : 'DE'},${line % 5 === 0},2024-01-05,2026-01-01,${line % 40},${line % 7}\n`
    if (line % 1000 === 0) { if (!out.write(text)) await once(out, 'drain'); text = '' }
  }
  out.end(text); await once(out, 'finish')
  await s.sql`create extension if not exists pg_stat_statements`
  await s.sql`select pg_stat_statements_reset()`
  const t0 = Date.now()
  const r = spawnSync(process.execPath, ['--import', '/tmp/memlog.mjs', '--import', 'tsx', 'src/cli/main.ts', 'import', 'customers', '/tmp/scratch.csv', '--account', String(a.id)], { env: { ...process.env, DATABASE_URL: s.url, LOG_LEVEL: 'error' }, encoding: 'utf8' })
  console.log(Date.now() - t0, 'ms', r.stdout, r.stderr.split("\n").filter(l => l.startsWith("MEM")).join("\n"))
  const rows = await s.sql`select round(total_exec_time)::int as ms, calls, left(regexp_replace(query, '\s+', ' ', 'g'), 160) as q from pg_stat_statements order by total_exec_time desc limit 25`
  for (const r of rows) console.log(r.ms, r.calls, r.q)
  await s.stop()
})
