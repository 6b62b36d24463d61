import { ok, type Route, route } from '../route.ts'
import { listBackups } from './files.ts'
import { BackupRequested, Backups } from './schemas.ts'
import { requestBackup } from './task.ts'

const BACKUPS = '/admin/v1/backups'

export const backupRoutes: Route[] = [
  route({
    method: 'GET',
    path: BACKUPS,
    auth: 'admin',
    name: 'list-backups',
    summary: 'List the backup files in the backup folder, newest first',
    reply: { status: 200, body: Backups },
    handler: async (_req, app) =>
      ok({ folder: app.config.backupDir, backups: listBackups(app.config.backupDir) }),
  }),
  route({
    method: 'POST',
    path: BACKUPS,
    auth: 'admin',
    name: 'start-backup',
    summary: 'Start a backup of the whole database, made by a worker into the backup folder',
    reply: { status: 202, body: BackupRequested },
    handler: async (_req, app) => ok(await requestBackup(app).then(() => ({ queued: true })), 202),
  }),
]
