import { parseArgs } from 'node:util'
import v8 from 'node:v8'
import { environmentHelp, loadConfig } from '../config.ts'
import { startService } from '../service.ts'
import { keyChecker } from '../db/key-check.ts'
import { connect } from '../db/client.ts'
import { migrate } from '../db/migrate.ts'
import { createLog, type Log } from '../log.ts'
import { resolveDatabase } from './database.ts'
import { createDemoIfEmpty } from './demo.ts'
import { adminUsage, runAdmin } from './admin.ts'
import { backupUsage, restoreUsage, runBackupCommand, runRestoreCommand } from './backup.ts'
import { countEventsUsage, runCountEvents } from './count-events.ts'
import { importUsage, runImport } from './import.ts'

// The one table of commands (as KNOBS is of the environment): what `service --help` lists, each
// command's own --help, and how it runs. `serving` commands run the service; the others are one-off
// commands on an admin connection, `migrated` ones after the migrations (a backup is of
// the database as it is; a restore makes the schema of the backup's own version, which the
// next start migrates).
interface Command {
  // The command's line in `service --help`: its arguments, then what it does.
  synopsis: string
  summary: string
  help: string | (() => string)
  kind: 'serving' | 'database' | 'migrated'
}
const COMMANDS: Record<string, Command> = {
  serve: {
    synopsis: 'serve [--no-worker]',
    summary: 'HTTP API, with the background worker in the same process unless --no-worker',
    help:
      'service serve [--no-worker]\n\n' +
      'Serves the HTTP API on HOST:PORT and runs background jobs unless --no-worker.\n',
    kind: 'serving',
  },
  worker: {
    synopsis: 'worker',
    summary: 'background jobs only',
    help: 'service worker\n\nRuns background jobs only (WORKER_CONCURRENCY at a time).\n',
    kind: 'serving',
  },
  migrate: {
    synopsis: 'migrate',
    summary: 'apply database migrations and exit',
    help: 'service migrate\n\nApplies pending migrations under an advisory lock and exits.\n',
    kind: 'database',
  },
  admin: {
    synopsis: 'admin <operation>',
    summary: 'account administration against the database (service admin --help)',
    help: () => `${adminUsage()}\n`,
    kind: 'migrated',
  },
  import: {
    synopsis: 'import customers|contacts FILE.csv --account ID',
    summary: 'import a CSV file (service import --help)',
    help: importUsage,
    kind: 'migrated',
  },
  'count-events': {
    synopsis: 'count-events [--account ID]',
    summary: "count tracked events into today's metrics now (the worker does it daily)",
    help: countEventsUsage,
    kind: 'migrated',
  },
  backup: {
    synopsis: 'backup [--to DIR]',
    summary: 'write a backup of the whole database, while the service serves',
    help: backupUsage,
    kind: 'database',
  },
  restore: {
    synopsis: 'restore FILE [--force]',
    summary: 'restore a backup into an empty database (the service stopped)',
    help: restoreUsage,
    kind: 'database',
  },
}

// A synopsis too long for the column goes on a line of its own, its summary below it.
const SYNOPSIS_WIDTH = 22
const usage = `service <command>

Commands:
${Object.values(COMMANDS)
  .map(({ synopsis, summary }) =>
    synopsis.length < SYNOPSIS_WIDTH
      ? `  ${synopsis.padEnd(SYNOPSIS_WIDTH)}${summary}`
      : `  ${synopsis}\n  ${' '.repeat(SYNOPSIS_WIDTH)}${summary}`,
  )
  .join('\n')}

Environment:
${environmentHelp()}
`

// A serving process keeps little alive and makes much short-lived garbage: with V8's defaults
// its RSS sat at several times the live heap. More, smaller collections trade some CPU for it
// (docs/benchmarks.md, "Figures behind code choices"). Set here rather than as node flags, so the
// bundle, the single executable and `node src/cli/main.ts` all run with them; the same flag given
// to node on the command line wins.
const HEAP_FLAGS = ['--semi-space-growth-factor=1', '--heap-growing-percent=20']
const tuneHeap = () => {
  for (const flag of HEAP_FLAGS)
    if (!process.execArgv.some((given) => given.startsWith(flag.split('=')[0])))
      v8.setFlagsFromString(flag)
}

// SIGTERM/SIGINT drain in-flight requests and jobs, stop what was started, log one line naming the
// signal, then exit 0. Set up before anything starts: a signal during start-up (the embedded
// database already running, the demo account being made) must not leave a process behind.
const stops: (() => Promise<void>)[] = []
const onSignal = (command: string, log: Log) => (signal: NodeJS.Signals) => {
  const started = performance.now()
  ;(async () => {
    for (const stop of stops.reverse()) await stop()
  })().then(
    () => {
      log('info', 'stopped', {
        command,
        reason: signal,
        ms: Math.round(performance.now() - started),
      })
      process.exit(0)
    },
    (err) => {
      log('error', 'stopped', {
        command,
        reason: signal,
        error: String((err as Error)?.message ?? err),
      })
      process.exit(1)
    },
  )
}

const main = async (argv: string[]): Promise<number | undefined> => {
  const [command, ...args] = argv
  if (!command || command === '--help' || command === 'help')
    return void process.stdout.write(usage)
  const known = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined
  if (args.includes('--help')) {
    const help = known?.help ?? usage
    process.stdout.write(typeof help === 'string' ? help : help())
    return 0
  }
  const config = loadConfig()
  const log = createLog(config.logLevel)
  if (!known) {
    process.stderr.write(`Unknown command '${command}'.\n\n${usage}`)
    return 2
  }
  const serving = known.kind === 'serving'
  if (serving) {
    tuneHeap()
    process.once('SIGTERM', onSignal(command, log))
    process.once('SIGINT', onSignal(command, log))
  }
  const db = await resolveDatabase(config, log)
  stops.push(db.stop)
  // The embedded cluster's address, for psql and backups (it listens on 127.0.0.1 only); its
  // password stays in its file.
  if (db.dataDir) {
    const url = new URL(db.url)
    url.password = ''
    log('info', 'embedded database', {
      url: url.toString(),
      password_file: db.passwordFile,
      data: db.dataDir,
    })
  }
  if (serving) {
    const { values } = parseArgs({
      args,
      options: { 'no-worker': { type: 'boolean' } },
      strict: false,
    })
    const parts = {
      http: command === 'serve',
      worker: command === 'worker' || !values['no-worker'],
    }
    const service = await startService(config, db.url, parts).catch(async (err) => {
      await db.stop()
      throw err
    })
    stops.push(service.stop)
    if (service.port !== undefined) {
      log('info', 'listening', {
        port: service.port,
        worker: parts.worker,
        embedded: db.dataDir !== undefined,
      })
      if (db.dataDir) {
        // A signal while the demo account is being made stops the service after it, not under it.
        const demo = createDemoIfEmpty(service.app.sql, service.port, db.dataDir, log)
        stops.push(() => demo.then(undefined, () => {}))
        await demo
      }
    }
    return undefined
  }
  // A restore holds one connection, so that it can tell whether anyone else is connected.
  const sql = connect(db.url, { max: command === 'restore' ? 1 : 2, role: 'admin' })
  try {
    if (command === 'backup') return await runBackupCommand(sql, config, args)
    if (command === 'restore') return await runRestoreCommand(sql, config, db.url, args)
    if (command === 'migrate') {
      const applied = await migrate(sql, db.url)
      process.stdout.write(
        applied.length ? `Applied ${applied.join(', ')}\n` : 'Nothing to apply.\n',
      )
      return 0
    }
    await migrate(sql, db.url)
    if (command === 'count-events') return await runCountEvents(sql, args)
    // A command serves no keys; the checker is there for the admin handlers that reset it. Its one
    // pool does expensive work too, as a command serves nobody else.
    const app = { sql, heavy: sql, admin: sql, config, log, keys: keyChecker(sql, () => {}) }
    if (command === 'import') return await runImport(app, args)
    return await runAdmin(app, args)
  } finally {
    await sql.end({ timeout: 5 })
    await db.stop()
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code
  },
  (err) => {
    process.stderr.write(`${(err as Error)?.message ?? err}\n`)
    process.exit(1)
  },
)
