import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'

// A backup folder's files: service-backup-<UTC time to the millisecond>.gz, so that their names sort
// by age and two backups never share a name. Retention keeps the newest; other files are left alone.
const NAME = /^service-backup-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.gz$/

export const backupName = (at: Date) => `service-backup-${at.toISOString().replace(/[:.]/g, '-')}.gz`

export interface BackupFile {
  file: string
  bytes: number
  created_at: string
}

// The folder's backups, newest first; none when the folder does not exist yet.
export const listBackups = (dir: string): BackupFile[] => {
  let names: string[]
  try {
    names = readdirSync(dir).filter((name) => NAME.test(name))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
  return names
    .sort()
    .reverse()
    .map((file) => {
      const stat = statSync(join(dir, file))
      return { file, bytes: stat.size, created_at: stat.mtime.toISOString() }
    })
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
