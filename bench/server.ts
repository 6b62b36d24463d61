import { spawn, type ChildProcess } from 'node:child_process'
import { rssMb } from './lib.ts'
import { freePort } from '../test/helpers/cluster.ts'

export const ADMIN_TOKEN = 'bench-admin-token'

// The service as its own process (`serve`, HTTP + worker, or `serve --no-worker` beside a separate
// `worker`), as deployed, so its RSS is its own.
export const startServer = async (databaseUrl: string, env: Record<string, string> = {}, args: string[] = []) => {
  const port = await freePort()
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', ...args], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SERVICE_ADMIN_TOKEN: ADMIN_TOKEN,
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
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
  const exited = new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode)
    else child.once('exit', (code) => resolve(code))
  })
  // Resolves with the exit code, at once for a process already gone.
  const stop = () => {
    child.kill('SIGTERM')
    return exited
  }
  return { base, admin, rssMb: () => rssMb(child.pid!), stop, exited, pid: child.pid! }
}
