import { createHash } from 'node:crypto'
import {
  cpSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'

// The embedded PostgreSQL's files (bin/, lib/, share/) as the service carries, copies, unpacks and
// checks them. build.mjs packs them into the single executable and records their digest; the
// service checks a folder of them against that digest before anything in it runs, so files
// changed, added or removed after unpacking are never executed (docs/security.md).

// Static libraries and headers are not needed to run the server.
const kept = (rel: string, isDirectory: boolean) =>
  isDirectory ? rel !== 'include' : !rel.endsWith('.a')

interface Entry {
  rel: string
  kind: 'folder' | 'file' | 'link'
  mode: number
  uid: number
}

const walk = (root: string, keep: (rel: string, isDirectory: boolean) => boolean): Entry[] => {
  const entries: Entry[] = []
  const visit = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name)
      const rel = relative(root, path)
      const stat = lstatSync(path)
      if (!keep(rel, stat.isDirectory())) continue
      const kind = stat.isDirectory()
        ? 'folder'
        : stat.isSymbolicLink()
          ? 'link'
          : stat.isFile()
            ? 'file'
            : undefined
      if (!kind) throw new Error(`${path} is neither a file, a folder nor a link`)
      entries.push({ rel, kind, mode: stat.mode & 0o7777, uid: stat.uid })
      if (kind === 'folder') visit(path)
    }
  }
  visit(root)
  return entries
}

// One SHA-256 over every path, its kind and content (a link's target), and whether its owner may
// execute it. Other mode bits follow the umask of whoever unpacked the files; writable-by-others
// is refused on its own (refuseUnlessIntact).
const digestOf = (root: string, entries: Entry[]) => {
  const hash = createHash('sha256')
  for (const { rel, kind, mode } of entries) {
    const path = join(root, rel)
    const content =
      kind === 'link'
        ? readlinkSync(path)
        : kind === 'file'
          ? `${mode & 0o100 ? 'x' : '-'}${createHash('sha256').update(readFileSync(path)).digest('hex')}`
          : ''
    hash.update(`${kind}\0${rel}\0${content}\n`)
  }
  return hash.digest('hex')
}

// The digest of an installation's files as they are packed and copied (a package's native/ folder).
export const installationDigest = (root: string) => digestOf(root, walk(root, kept))

// The asset format: gzip of a JSON header line listing [path, mode, size | symlink target] for
// the files and links, then the files' bytes in that order.
type PackEntry = [path: string, mode: number, sizeOrLink: number | string]
export const pack = (root: string) => {
  const entries: PackEntry[] = []
  const chunks: Buffer[] = []
  for (const { rel, kind, mode } of walk(root, kept)) {
    const path = join(root, rel)
    if (kind === 'link') entries.push([rel, 0o777, readlinkSync(path)])
    else if (kind === 'file') {
      const bytes = readFileSync(path)
      entries.push([rel, mode, bytes.length])
      chunks.push(bytes)
    }
  }
  return gzipSync(Buffer.concat([Buffer.from(JSON.stringify(entries) + '\n'), ...chunks]), {
    level: 6,
  })
}

export const unpack = (packed: Buffer, into: string) => {
  const raw = gunzipSync(packed)
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

// The files an installation packs, copied as they are (for a root process whose PostgreSQL user
// cannot reach node_modules).
export const copyInstallation = (from: string, into: string) =>
  cpSync(from, into, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (path) => path === from || kept(relative(from, path), lstatSync(path).isDirectory()),
  })

const me = () => process.getuid?.() ?? 0
const trustedOwner = (uid: number) => uid === me() || uid === 0

// A folder whose contents only this user (or root) can change: it, and every folder above it,
// owned by this user or root and writable by no one else (above it, a sticky folder such as /tmp
// is fine: there others cannot rename or remove what is ours).
export const refuseUntrustedFolder = (folder: string, what: string) => {
  const path = resolve(folder)
  const parts = path.split(sep).filter(Boolean)
  for (let i = 0; i <= parts.length; i++) {
    const dir = sep + parts.slice(0, i).join(sep)
    const stat = lstatSync(dir)
    const sticky = i < parts.length && stat.mode & 0o1000
    const problem = stat.isSymbolicLink()
      ? 'is a symbolic link'
      : !stat.isDirectory()
        ? 'is not a folder'
        : !trustedOwner(stat.uid)
          ? `is owned by user ${stat.uid}, neither this user (${me()}) nor root`
          : stat.mode & 0o022 && !sticky
            ? `is writable by ${stat.mode & 0o020 ? 'its group' : 'other users'}`
            : undefined
    if (problem)
      throw new Error(
        `Refusing ${what} in ${path}: ${dir} ${problem}, so another user could change what runs from it. ` +
          'Remove it, or set SERVICE_CACHE_DIR to a folder only this user can write.',
      )
  }
}

// Refuses a folder of PostgreSQL binaries that anyone but this user or root could change, or that
// is not exactly what the digest says, before any of it runs.
export const refuseUnlessIntact = (home: string, digest: string) => {
  refuseUntrustedFolder(home, 'the PostgreSQL binaries')
  const entries = walk(home, () => true)
  const loose = entries.find((e) => !trustedOwner(e.uid) || (e.kind !== 'link' && e.mode & 0o022))
  const changed = !loose && digestOf(home, entries) !== digest
  if (loose || changed)
    throw new Error(
      `Refusing the PostgreSQL binaries in ${home}: ` +
        (loose
          ? `${loose.rel} is owned by user ${loose.uid} or writable by others. `
          : 'they differ from the ones this service was built with. ') +
        'Remove the folder: the service unpacks it again.',
    )
}
