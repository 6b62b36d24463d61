import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'

// A backup folder's files: service-backup-<UTC time to the millisecond>.gz (.gz.age when
// encrypted), so that their names sort by age and two backups never share a name. Retention keeps
// the newest; other files are left alone.
const NAME = /^service-backup-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.gz(\.age)?$/

export const backupName = (at: Date, encrypted = false) =>
  `service-backup-${at.toISOString().replace(/[:.]/g, '-')}.gz${encrypted ? '.age' : ''}`

// A backup is written to this name, and renamed when complete.
export const partialName = (file: string) => `${file}.partial`
const PARTIAL = /\.partial$/
// A running backup writes its .partial as its rows come; one untouched this long was left by a
// backup that was killed, and is removed by the next.
export const STALE_PARTIAL_MS = 3_600_000

export interface BackupFile {
  file: string
  bytes: number
  created_at: string
}

// The folder's files of backups (complete or partial); none when the folder does not exist yet.
const named = (dir: string, partial = false) => {
  try {
    return readdirSync(dir).filter(
      (name) => PARTIAL.test(name) === partial && NAME.test(name.replace(PARTIAL, '')),
    )
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
}

// The folder's backups, newest first.
export const listBackups = (dir: string): BackupFile[] =>
  named(dir)
    .sort()
    .reverse()
    .map((file) => {
      const stat = statSync(join(dir, file))
      return { file, bytes: stat.size, created_at: stat.mtime.toISOString() }
    })

// Removes the .partial files that killed backups left; returns their names.
export const removeStalePartials = (dir: string, now = Date.now()) => {
  const stale = named(dir, true).filter((name) => {
    const modified = statSync(join(dir, name), { throwIfNoEntry: false })?.mtimeMs
    return modified !== undefined && now - modified > STALE_PARTIAL_MS
  })
  for (const name of stale) rmSync(join(dir, name), { force: true })
  return stale
}

// Removes all but the newest `keep` backups; returns the names removed.
export const pruneBackups = (dir: string, keep: number) => {
  const removed = listBackups(dir)
    .slice(keep)
    .map((b) => b.file)
  for (const file of removed) rmSync(join(dir, file), { force: true })
  return removed
}

// Backups are 0600 (they hold every account's data), in a folder only their owner reads.
export const backupFolder = (dir: string) => {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return dir
}
