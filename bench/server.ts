import { spawn, type ChildProcess } from 'node:child_process'
import { rssMb } from './lib.ts'
import { freePort } from '../test/helpers/cluster.ts'

export const ADMIN_TOKEN = 'bench-admin-token'

// The benches run the service as it ships: the single executable that `npm run build` makes, which
// bench/run.ts builds first. Each command is a process of its own, as deployed, so its
// RSS is its own.
const EXECUTABLE = 'dist/service'

const spawnService = (args: string[], databaseUrl: string, env: Record<string, string>, port = 0) =>
  spawn(EXECUTABLE, args, {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SERVICE_ADMIN_TOKEN: ADMIN_TOKEN,
      ...env,
    },
    stdio: ['ignore', 'inherit', 'pipe'],
  })

const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode)
    else child.once('exit', (code) => resolve(code))
  })

// `worker`: the background jobs alone, beside `serve --no-worker`. Its standard error is kept (and
// still shown).
export const startWorker = (databaseUrl: string, env: Record<string, string> = {}) => {
  const child = spawnService(['worker'], databaseUrl, env)
  let stderr = ''
  child.stderr!.on('data', (chunk) => {
    stderr += chunk
    process.stderr.write(chunk)
  })
  const exited = exitOf(child)
  return {
    pid: child.pid!,
    stderr: () => stderr,
    stop: () => {
      child.kill('SIGTERM')
      return exited
    },
  }
}

// `serve` (HTTP and the worker, or HTTP alone with `--no-worker` in `args`), once it
// answers /readyz.
export const startServer = async (
  databaseUrl: string,
  env: Record<string, string> = {},
  args: string[] = [],
) => {
  const port = await freePort()
  const child = spawnService(['serve', ...args], databaseUrl, env, port)
  child.stderr!.pipe(process.stderr)
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) break
    } catch {
      /* not up yet */
    }
    if (i > 300 || child.exitCode !== null) {
      child.kill('SIGKILL')
      throw new Error('the service did not start')
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
    return res.json()
  }
  const exited = exitOf(child)
  // Resolves with the exit code, at once for a process already gone.
  const stop = () => {
    child.kill('SIGTERM')
    return exited
  }
  return { base, admin, rssMb: () => rssMb(child.pid!), stop, exited, pid: child.pid! }
}
