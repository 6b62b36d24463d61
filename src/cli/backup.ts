import { type ParseArgsConfig, parseArgs } from 'node:util'
import { join, resolve } from 'node:path'
import cliProgress from 'cli-progress'
import type { Config } from '../config.ts'
import type { Sql } from '../db/client.ts'
import { backup, type Progress, restore } from '../backups/dump.ts'
import { backupFolder, backupName } from '../backups/files.ts'
import { size } from '../validate.ts'

export const backupUsage = `service backup [--to DIR]

Writes one consistent backup of the whole database (every account's data and the job queue) to
DIR (default SERVICE_BACKUP_DIR) as service-backup-<UTC time>.gz, while the service serves; with
SERVICE_BACKUP_KEY set, encrypted and authenticated with it as service-backup-<UTC time>.gz.age.
It works on the embedded database and on DATABASE_URL alike (docs/operations.md, "Backups").
Progress goes to stderr on a terminal; the file, its size and the time taken to stdout.
Exit status: 0 written, 1 failed (no file is left), 2 wrong usage.
`

export const restoreUsage = `service restore FILE [--force]

Restores a file written by service backup into the database: the embedded one in SERVICE_DATA_DIR
(made when missing) or DATABASE_URL. The database must be empty unless --force, which replaces all
of its data. Stop the service first: a restore refuses a database others are connected to.
Start the service afterwards: it migrates the restored data forward to its own version.
Exit status: 0 restored, 1 failed (the restore's rows are rolled back), 2 wrong usage.
`

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

// Runs `work` with a bar on a terminal, nothing on a pipe (the summary line says it all); the bar
// is gone before the summary or the failure's reason is written.
const withBar = async <T>(unit: string, work: (progress?: Progress) => Promise<T>): Promise<T> => {
  if (!process.stderr.isTTY) return work()
  const shown = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      hideCursor: true,
      format: `{bar} {percentage}% | {value}/{total} ${unit} | {table}`,
    },
    cliProgress.Presets.shades_classic,
  )
  let started = false
  try {
    return await work((done, total, table) => {
      if (!started) shown.start(total, done, { table })
      started = true
      shown.setTotal(total)
      shown.update(done, { table })
    })
  } finally {
    if (started) shown.stop()
  }
}

const usageError = (usage: string, why: string) => {
  process.stderr.write(`${why}\n\n${usage}`)
  return 2
}

// The command's arguments, or undefined when they are not its own.
const parsed = <T extends ParseArgsConfig>(config: T) => {
  try {
    return parseArgs(config)
  } catch {
    return undefined
  }
}

export const runBackupCommand = async (sql: Sql, config: Config, args: string[]) => {
  const given = parsed({ args, options: { to: { type: 'string' } } })
  if (!given) return usageError(backupUsage, `Unexpected arguments: ${args.join(' ')}`)
  const to = given.values.to ?? config.backupDir
  const key = config.backupKey
  const made = await withBar('rows (estimated)', (progress) =>
    backup(sql, join(backupFolder(resolve(to)), backupName(new Date(), key !== undefined)), {
      key,
      progress,
    }),
  )
  process.stdout.write(
    `Wrote ${made.file} (${size(made.bytes)}, ${made.rows} rows of ${made.tables} tables) in ${seconds(made.ms)}\n`,
  )
  return 0
}

const restoreArgs = (args: string[]) => {
  const given = parsed({ args, options: { force: { type: 'boolean' } }, allowPositionals: true })
  return given?.positionals.length === 1
    ? { file: resolve(given.positionals[0]), force: !!given.values.force }
    : undefined
}

export const runRestoreCommand = async (sql: Sql, config: Config, url: string, args: string[]) => {
  const given = restoreArgs(args)
  if (!given) return usageError(restoreUsage, 'Name one backup file to restore.')
  const done = await withBar('bytes', (progress) =>
    restore(sql, url, given.file, { force: given.force, key: config.backupKey, progress }),
  )
  process.stdout.write(
    `Restored ${given.file}: ${done.rows} rows of ${done.tables} tables at migration level ${done.migrations} ` +
      `in ${seconds(done.ms)}. Start the service to migrate it forward.\n`,
  )
  return 0
}
