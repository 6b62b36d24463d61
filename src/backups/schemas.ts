import * as v from 'valibot'
import { describe, Timestamp } from '../validate.ts'

export const BackupFile = v.object({
  file: describe(
    v.string(),
    'The file name in SERVICE_BACKUP_DIR; restore it with `service restore FILE`.',
  ),
  bytes: v.number(),
  created_at: Timestamp,
})
export const Backups = v.object({
  folder: describe(
    v.string(),
    "SERVICE_BACKUP_DIR of the process that answered (the worker's, where it runs).",
  ),
  backups: describe(v.array(BackupFile), 'Newest first.'),
})
export const BackupRequested = v.object({
  queued: describe(v.literal(true), 'A worker makes the backup; it is listed here once written.'),
})
