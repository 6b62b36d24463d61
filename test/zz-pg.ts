import { spawnSync } from 'node:child_process'
import { mkdtempSync, chmodSync } from 'node:fs'
import { startEmbedded } from '../src/db/embedded.ts'
const dir = mkdtempSync('/tmp/zzpg-'); chmodSync(dir, 0o755)
const pg = await startEmbedded(dir + '/pg', 55111, ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'])
process.env.TEST_DATABASE_URL = pg.url
spawnSync(process.execPath, ['--import', 'tsx', '--test', 'test/zz-import-scratch.ts'], { stdio: 'inherit', env: process.env })
await pg.stop()
