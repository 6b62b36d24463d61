import { basename, join } from 'node:path'
import type { App } from '../context.ts'
import { addJobs, backupJob, type BackupPayload } from '../db/jobs.ts'
import { backup } from './dump.ts'
import { backupFolder, backupName, pruneBackups } from './files.ts'
import { recordRun } from './runs.ts'

// A backup made by the worker (scheduled, or asked for through the admin API) into
// SERVICE_BACKUP_DIR, keeping the newest SERVICE_BACKUP_KEEP; its outcome is recorded for /metrics.
export const runBackup = async (app: App, { origin }: BackupPayload) => {
  const started = new Date()
  try {
    const dir = backupFolder(app.config.backupDir)
    const key = app.config.backupKey
    const made = await backup(app.sql, join(dir, backupName(started, key !== undefined)), { key })
    const removed = pruneBackups(dir, app.config.backupKeep)
    const file = basename(made.file)
    await recordRun(app.sql, { origin, started_at: started, file, bytes: made.bytes })
    return { file, bytes: made.bytes, rows: made.rows, removed: removed.length }
  } catch (err) {
    await recordRun(app.sql, {
      origin,
      started_at: started,
      error: String((err as Error)?.message ?? err),
    })
    throw err
  }
}

export const requestBackup = (app: App) => addJobs(app.sql, [backupJob()])
