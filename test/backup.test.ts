// Backups (issue 35): `service backup` of the single executable while uploads and tracking run,
// restored into a fresh data folder that the executable then serves, twice; the worker's backups
// with their retention, the admin API rows and the /metrics gauges.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { after, before, test } from 'node:test'
import postgres from 'postgres'
import { backup, restore } from '../src/backups/dump.ts'
import { listBackups, STALE_PARTIAL_MS } from '../src/backups/files.ts'
import { runBackup } from '../src/backups/task.ts'
import { loadConfig } from '../src/config.ts'
import { connect } from '../src/db/client.ts'
import { crontab } from '../src/jobs/tasks.ts'
import { freePort } from './helpers/cluster.ts'
import { freshDatabase } from './helpers/db.ts'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'

const EXECUTABLE = join(process.cwd(), 'dist', 'service')
const dir = mkdtempSync(join(tmpdir(), 'service-backup-'))
// As root the server runs as the postgres user, who must be able to enter the folder.
chmodSync(dir, 0o755)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
// A failed test leaves no server behind: SIGKILL, after which the watchdog stops its PostgreSQL.
const servers: ChildProcess[] = []
after(async () => {
  for (const child of servers.filter((c) => c.exitCode === null)) {
    child.kill('SIGKILL')
    await new Promise((done) => child.once('exit', done))
  }
  await sleep(500)
  rmSync(dir, { recursive: true, force: true, maxRetries: 5 })
})

const environment = (data: string, extra: Record<string, string> = {}) => ({
  PATH: '/nonexistent',
  HOME: dir,
  LOG_LEVEL: 'warn',
  SERVICE_CACHE_DIR: join(dir, 'cache'),
  SERVICE_DATA_DIR: data,
  SERVICE_ADMIN_TOKEN: ADMIN_TOKEN,
  SERVICE_API_RATE_LIMIT: '100000',
  SERVICE_TRACK_RATE_LIMIT: '100000',
  // Few uploads wait at once: the restored queue's work stays small.
  SERVICE_MAX_PENDING_UPLOADS: '10',
  ...extra,
})

// One command of the executable (or another program), to its end (never spawnSync: the load runs in
// this process).
const command = (args: string[], env: Record<string, string>, program = EXECUTABLE, cwd = dir) =>
  new Promise<{ code: number | null; out: string; err: string }>((done) => {
    const child = spawn(program, args, { env, cwd })
    let [out, err] = ['', '']
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    child.on('exit', (code) => done({ code, out, err }))
  })

const serve = async (data: string, pgPort: number) => {
  const port = await freePort()
  const env = environment(data, {
    PORT: String(port),
    HOST: '127.0.0.1',
    EMBEDDED_PG_PORT: String(pgPort),
  })
  const child = spawn(EXECUTABLE, ['serve'], { env, cwd: dir })
  servers.push(child)
  let out = ''
  child.stdout.on('data', (c) => (out += c))
  child.stderr.on('data', (c) => (out += c))
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)))
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (
      await fetch(`${base}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break
    assert.ok(i < 900 && child.exitCode === null, `serve did not start:\n${out}`)
    await sleep(100)
  }
  const call = async (
    method: string,
    path: string,
    body: unknown,
    headers: Record<string, string>,
  ) => {
    const res = await fetch(base + path, {
      method,
      headers: {
        ...headers,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any }
  }
  const stop = async () => {
    child.kill('SIGTERM')
    assert.equal(await exited, 0, out)
  }
  return { env, call, stop, out: () => out }
}
type Served = Awaited<ReturnType<typeof serve>>

const admin = (s: Served, method: string, path: string, body?: unknown) =>
  s.call(method, `/admin/v1${path}`, body, { authorization: `Bearer ${ADMIN_TOKEN}` })
const api = (s: Served, key: string, method: string, path: string, body?: unknown) =>
  s.call(method, path, body, { 'service-key': key })

// The backup file's trailer: each table's row count.
const trailer = (file: string) => {
  const lines = gunzipSync(readFileSync(file)).toString('utf8').trimEnd().split('\n')
  return JSON.parse(lines[lines.length - 1]).rows as Record<string, number>
}

test('a backup taken under uploads and tracking restores, twice, with every acknowledged upload scored', async () => {
  const pgPort = await freePort()
  const first = join(dir, 'first')
  const a = await serve(first, pgPort)
  const account = (await admin(a, 'POST', '/accounts', { name: 'Acme' })).body
  const key = (
    await admin(a, 'POST', `/accounts/${account.id}/keys`, {
      scopes: ['search', 'upload', 'track'],
    })
  ).body.token as string
  await admin(a, 'POST', `/accounts/${account.id}/properties`, {
    entity: 'customer',
    kind: 'metric',
    codename: 'logins',
    type: 'number',
  })
  const model = await admin(a, 'PUT', `/accounts/${account.id}/scoring`, {
    customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] },
  })
  assert.equal(model.status, 200, JSON.stringify(model.body))
  await admin(a, 'PUT', `/accounts/${account.id}/tracking`, { domains: ['acme.test'] })

  // The write load: uploads of 25 customers and batches of 10 events, each loop one request at a
  // time, every acknowledgement noted with its time.
  const acked: { upload: number; at: number; first: string }[] = []
  const eventsAcked: { n: number; at: number }[] = []
  let running = true
  const today = new Date().toISOString().slice(0, 10)
  const uploads = (async () => {
    for (let n = 0; running; n++) {
      const customers = Array.from({ length: 25 }, (_, i) => ({
        external_id: `u${n}-${i}`,
        name: `Customer ${n}-${i}`,
        metrics: [{ date: today, logins: (n + i) % 50 }],
      }))
      const res = await api(a, key, 'POST', '/api/v1/customers', { customers })
      // 429: 10 uploads wait already (SERVICE_MAX_PENDING_UPLOADS); not acknowledged,
      // so sent again.
      if (res.status === 429) {
        await sleep(200)
        continue
      }
      assert.equal(res.status, 200, JSON.stringify(res.body))
      acked.push({ upload: res.body.upload_id, at: Date.now(), first: `u${n}-0` })
    }
  })().catch((err: Error) => err)
  const tracking = (async () => {
    for (let n = 0; running; n++) {
      const events = Array.from({ length: 10 }, (_, i) => ({
        name: 'login',
        timestamp: Date.now(),
        identification: { customer: `t${n}-${i}` },
      }))
      const res = await api(a, key, 'POST', '/api/tracker/track', {
        trackerKey: account.tracker_key,
        events,
      })
      assert.equal(res.status, 200, JSON.stringify(res.body))
      eventsAcked.push({ n: 10, at: Date.now() })
    }
  })().catch((err: Error) => err)
  await sleep(1500)
  const began = Date.now()
  const made = await command(['backup', '--to', join(dir, 'backups')], a.env)
  assert.equal(made.code, 0, made.err)
  await sleep(500)
  running = false
  // A loop's failure is kept until here: rejected while nobody awaited it, it would end the file.
  for (const failed of await Promise.all([uploads, tracking])) if (failed) throw failed
  await a.stop()
  const file =
    /^Wrote (\S+) \(([\d.]+ (?:bytes|KB|MB)), (\d+) rows of (\d+) tables\) in [\d.]+ s$/m.exec(
      made.out,
    )
  assert.ok(file, made.out)
  const before = acked.filter((u) => u.at < began)
  const after = acked.filter((u) => u.at >= began)
  assert.ok(
    before.length >= 3 && after.length >= 1,
    `uploads before ${before.length}, after ${after.length}`,
  )
  const eventsBefore = eventsAcked.filter((e) => e.at < began).reduce((sum, e) => sum + e.n, 0)
  assert.ok(eventsBefore > 0)
  // The job queue went into the file: the uploads and events waiting for their jobs come
  // back with them.
  const rows = trailer(file[1])
  assert.ok(rows['graphile_worker._private_jobs'] > 0, JSON.stringify(rows))
  assert.ok(rows['tracking_events'] >= eventsBefore, JSON.stringify(rows))

  // Every upload acknowledged before the backup began is processed and scored on the restored data.
  const check = async (s: Served) => {
    for (const u of before) {
      for (let i = 0; ; i++) {
        const res = await api(s, key, 'GET', `/api/v1/uploads/${u.upload}`)
        assert.equal(res.status, 200, JSON.stringify(res.body))
        if (res.body.status === 'processed' && res.body.scored_at) break
        assert.ok(i < 600, `upload ${u.upload} is ${res.body.status}, scored ${res.body.scored_at}`)
        await sleep(100)
      }
      const customer = await api(s, key, 'GET', `/api/v1/customer/${u.first}`)
      assert.equal(customer.status, 200, `${u.first}: ${JSON.stringify(customer.body)}`)
      assert.equal(typeof customer.body.engagementscore, 'number', JSON.stringify(customer.body))
    }
    // No job is left waiting, locked or failed: the restored queue ran.
    const password = readFileSync(join(s.env.SERVICE_DATA_DIR, 'service-password'), 'utf8').trim()
    const sql = postgres({
      host: '127.0.0.1',
      port: pgPort,
      user: 'postgres',
      password,
      database: 'postgres',
      max: 1,
    })
    try {
      for (let i = 0; ; i++) {
        const jobs = await sql`select task_identifier, attempts, run_at, locked_at, last_error
            from graphile_worker.jobs`
        if (jobs.length === 0) break
        assert.ok(i < 300, `jobs still in the queue: ${JSON.stringify(jobs)}`)
        await sleep(100)
      }
      const [events] =
        await sql`select count(*)::int as n, count(*) filter (where status = 'received')::int
          as waiting
        from tracking_events`
      assert.ok(events.n >= eventsBefore && events.waiting === 0, JSON.stringify(events))
    } finally {
      await sql.end()
    }
  }

  const second = join(dir, 'second')
  const restored = await command(
    ['restore', file[1]],
    environment(second, { EMBEDDED_PG_PORT: String(pgPort) }),
  )
  assert.equal(restored.code, 0, restored.err)
  assert.match(restored.out, /^Restored .*: \d+ rows of \d+ tables/)
  const b = await serve(second, pgPort)
  await check(b)
  await b.stop()

  // The same file again, onto the data it made: refused without --force, then replaced.
  const env = environment(second, { EMBEDDED_PG_PORT: String(pgPort) })
  const refused = await command(['restore', file[1]], env)
  assert.equal(refused.code, 1)
  assert.match(refused.err, /not empty.*--force/)
  const again = await command(['restore', '--force', file[1]], env)
  assert.equal(again.code, 0, again.err)
  const c = await serve(second, pgPort)
  await check(c)
  await c.stop()
})

let s: TestService
const folder = join(dir, 'worker-backups')
before(async () => {
  s = await startTestService({ backupDir: folder, backupKeep: 2 })
})
after(() => s?.stop())

test('backups the worker makes keep the newest SERVICE_BACKUP_KEEP and show in /metrics', async () => {
  const account = await s.account()
  assert.equal((await s.admin('GET', '/backups')).body.backups.length, 0)
  const names: string[] = []
  for (let i = 0; i < 3; i++) names.push((await runBackup(s.app, { origin: 'schedule' })).file)
  const kept = listBackups(folder).map((b) => b.file)
  assert.deepEqual(kept, names.slice(1).reverse())
  const metrics = (await s.call('GET', '/metrics')).body as string
  assert.match(metrics, /^service_backup_last_success_timestamp_seconds [1-9]/m)
  assert.match(metrics, /^service_backup_last_success_bytes [1-9]/m)
  assert.match(metrics, /^service_backup_failures 0$/m)

  // One asked for through the admin API is made by the worker, and the oldest goes.
  const asked = await s.admin('POST', '/backups')
  assert.equal(asked.status, 202)
  assert.deepEqual(asked.body, { queued: true })
  for (let i = 0; ; i++) {
    const listed = (await s.admin('GET', '/backups')).body
    if (listed.backups[0].file !== kept[0]) {
      assert.equal(listed.folder, folder)
      assert.equal(listed.backups.length, 2)
      assert.equal(listed.backups[1].file, kept[0])
      assert.ok(listed.backups[0].bytes > 0)
      break
    }
    assert.ok(i < 300, 'the requested backup was not made')
    await sleep(100)
  }
  assert.equal((await s.admin('GET', `/accounts/${account.id}`)).status, 200)

  // A backup that cannot be written is counted as failed.
  const blocked = join(dir, 'a-file')
  writeFileSync(blocked, '')
  await assert.rejects(
    runBackup(
      { ...s.app, config: { ...s.app.config, backupDir: blocked } },
      { origin: 'schedule' },
    ),
  )
  assert.match((await s.call('GET', '/metrics')).body, /^service_backup_failures 1$/m)
})

test('a .partial file that a killed backup left is removed by the next backup; a fresh one is kept', async () => {
  const folder = join(dir, 'partial-backups')
  mkdirSync(folder)
  const stale = join(folder, 'service-backup-2026-01-01T03-00-00-000Z.gz.partial')
  const running = join(folder, 'service-backup-2026-01-01T04-00-00-000Z.gz.age.partial')
  const other = join(folder, 'notes.partial')
  for (const file of [stale, running, other]) writeFileSync(file, 'x')
  const old = new Date(Date.now() - STALE_PARTIAL_MS - 60_000)
  utimesSync(stale, old, old)
  utimesSync(other, old, old)
  // A second, later, must not count as old.
  const recent = new Date(Date.now() - STALE_PARTIAL_MS + 60_000)
  utimesSync(running, recent, recent)
  const made = await runBackup(
    { ...s.app, config: { ...s.app.config, backupDir: folder } },
    { origin: 'schedule' },
  )
  assert.ok(existsSync(join(folder, made.file)))
  assert.ok(!existsSync(stale), 'the stale .partial is still there')
  assert.ok(existsSync(running), "a running backup's .partial was removed")
  assert.ok(existsSync(other), 'a file not named as a backup was removed')
})

test('with SERVICE_BACKUP_KEY the worker and the executable write sealed backups that the key restores', async () => {
  const key = 'a key for the backups test'
  const account = await s.account('Sealed')
  const folder = join(dir, 'sealed-backups')
  const made = await runBackup(
    { ...s.app, config: { ...s.app.config, backupDir: folder, backupKey: key } },
    {
      origin: 'api',
    },
  )
  assert.match(made.file, /^service-backup-\S+\.gz\.age$/)
  assert.deepEqual(
    listBackups(folder).map((b) => b.file),
    [made.file],
  )
  // The executable's bundle seals and opens them too (age-encryption is an ES module).
  const env = { ...environment(join(dir, 'unused')), DATABASE_URL: s.url, SERVICE_BACKUP_KEY: key }
  const written = await command(['backup', '--to', folder], env)
  assert.equal(written.code, 0, written.err)
  const file = /^Wrote (\S+\.gz\.age) /m.exec(written.out)?.[1]
  assert.ok(file, written.out)
  for (const sealed of [join(folder, made.file), file]) {
    assert.equal(readFileSync(sealed).subarray(0, 21).toString(), 'age-encryption.org/v1')
    const target = await freshDatabase()
    try {
      const restored = await command(['restore', sealed], { ...env, DATABASE_URL: target.url })
      assert.equal(restored.code, 0, restored.err)
      const sql = connect(target.url, { max: 1 })
      try {
        const [row] = await sql`select name from accounts where id = ${account.id}`
        assert.equal(row?.name, 'Sealed')
      } finally {
        await sql.end()
      }
      const refused = await command(['restore', '--force', sealed], {
        ...env,
        DATABASE_URL: target.url,
        SERVICE_BACKUP_KEY: 'not the key',
      })
      assert.equal(refused.code, 1)
      assert.match(refused.err, /fails authentication with SERVICE_BACKUP_KEY/)
    } finally {
      await target.drop()
    }
  }
})

test('a job in flight at a backup, even one add_job replaced as it ran, comes back with an attempt left', async () => {
  const key = 'restore-in-flight'
  const later = new Date(Date.now() + 86_400_000)
  const add = () => s.app
    .sql`select (graphile_worker.add_job('analyze_tables', '{"tables": []}'::json,
    run_at => ${later}::timestamptz, job_key => ${key})).id`
  const [{ id: replaced }] = await add()
  await s.app.sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'gone'
      where id = ${replaced}`
  const [{ id: successor }] = await add()
  const [old] = await s.app
    .sql`select attempts, max_attempts from graphile_worker.jobs where id = ${replaced}`
  assert.equal(old.attempts, old.max_attempts, 'add_job spends a replaced running job')
  const file = join(dir, 'in-flight.backup')
  try {
    await backup(s.app.sql, file)
  } finally {
    await s.app
      .sql`delete from graphile_worker._private_jobs where id in (${replaced}, ${successor})`
  }
  const target = await freshDatabase()
  const sql = connect(target.url, { max: 1 })
  try {
    await restore(sql, target.url, file)
    const jobs =
      await sql`select id, key, locked_at, attempts, max_attempts from graphile_worker.jobs
      where id in (${replaced}, ${successor}) order by id`
    assert.deepEqual(
      jobs.map((j) => [j.id, j.key, j.locked_at, j.attempts < j.max_attempts]),
      [
        [replaced, null, null, true],
        [successor, key, null, true],
      ],
    )
  } finally {
    await sql.end()
    await target.drop()
  }
})

// `service backup` from source against the test service's database (DATABASE_URL): the executable's
// own run is the round trip's above.
const backupFromSource = ['--import', 'tsx', 'src/cli/main.ts', 'backup']
const backupEnv = () => ({ PATH: '/usr/bin:/bin', DATABASE_URL: s.url, LOG_LEVEL: 'warn' })
const backupCommand = (args: string[]) =>
  command([...backupFromSource, ...args], backupEnv(), process.execPath, process.cwd())

test('service backup shows progress on a terminal only; a failure exits 1 with the reason, wrong usage 2', async () => {
  const to = join(dir, 'command-backups')
  // On a terminal (script(1) gives it one) a progress bar on stderr, then the summary.
  const quoted = [process.execPath, ...backupFromSource, '--to', to].join(' ')
  const shown = await command(['-qec', quoted, '/dev/null'], backupEnv(), 'script', process.cwd())
  assert.equal(shown.code, 0, shown.out + shown.err)
  assert.match(shown.out, /\d+\/\d+ rows \(estimated\) \| /)
  assert.match(
    shown.out,
    /Wrote \S+service-backup-\S+\.gz \([\d.]+ (bytes|KB|MB), \d+ rows of \d+ tables\) in/,
  )
  // On a pipe only the summary, on stdout.
  const piped = await backupCommand(['--to', to])
  assert.equal(piped.code, 0, piped.err)
  assert.equal(piped.err, '')
  assert.match(piped.out, /^Wrote /)
  assert.equal(listBackups(to).length, 2)
  // A folder that cannot be made: exit 1, the reason on stderr, nothing written.
  const blocked = join(dir, 'not-a-folder')
  writeFileSync(blocked, '')
  const failed = await backupCommand(['--to', join(blocked, 'backups')])
  assert.equal(failed.code, 1)
  assert.equal(failed.out, '')
  assert.match(failed.err, /not-a-folder/)
  // Wrong usage: exit 2 with the usage.
  const wrong = await backupCommand(['--into', to])
  assert.equal(wrong.code, 2)
  assert.match(wrong.err, /Unexpected arguments: --into .*\n\nservice backup \[--to DIR\]/s)
  assert.equal(listBackups(to).length, 2)
})

// postgres.js leaves its socket paused when a COPY's stream fills up as the COPY ends: the next
// table's COPY then waited forever (the console's "Start a backup" never listed its file). A
// few MB of rows, read more slowly than PostgreSQL sends them as the gzip stream pushes back,
// made it happen every time.
test("a backup whose tables outgrow the COPY stream's buffer ends, with every row", {
  timeout: 60_000,
}, async () => {
  const account = await s.account('Large')
  const n = 30_000
  await s.app.sql`insert into customers (account_id, external_id, name, attributes)
    select ${account.id}, 'bulk-' || g, 'Customer ' || g,
    jsonb_build_object('note', repeat('x', 100))
    from generate_series(1, ${n}) g`
  const file = join(dir, 'large.backup')
  try {
    const made = await backup(s.app.sql, file)
    const [{ count }] = await s.app.sql`select count(*)::int from customers`
    assert.ok(count >= n)
    assert.equal(trailer(made.file).customers, count)
  } finally {
    await s.app.sql`delete from customers where account_id = ${account.id}`
  }
})

test('SERVICE_BACKUP_SCHEDULE is a cron expression, checked at start, and adds a crontab line', () => {
  assert.throws(
    () => loadConfig({ SERVICE_BACKUP_SCHEDULE: 'every night' }),
    /SERVICE_BACKUP_SCHEDULE 'every night'/,
  )
  const config = loadConfig({ SERVICE_BACKUP_SCHEDULE: '0 3 * * *' })
  assert.ok(
    crontab(config).some((line) => /^0 3 \* \* \* backup_database \?max=1&queue=backup/.test(line)),
  )
  assert.ok(!crontab(loadConfig({})).some((line) => line.includes('backup_database')))
})
