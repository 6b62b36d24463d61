import { readdirSync, readFileSync } from 'node:fs'
import { spawn, type ChildProcess } from 'node:child_process'
import { ADMIN_TOKEN, SECRET_KEY } from './service.ts'
import { freePort } from './cluster.ts'

// A `service` command as its own process (serve, worker, ...), for tests that kill it.
export const startProcess = async (
  args: string[],
  databaseUrl: string,
  env: Record<string, string> = {},
) => {
  const port = await freePort()
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', ...args],
    {
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'error',
        SERVICE_ADMIN_TOKEN: ADMIN_TOKEN,
        SERVICE_WEBHOOK_ALLOW_PRIVATE: '1',
        SERVICE_SECRET_KEY: SECRET_KEY,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => {
    stdout += d
  })
  child.stderr!.on('data', (d) => {
    stderr += d
  })
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  )
  const base = `http://127.0.0.1:${port}`
  if (args[0] === 'serve') {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${base}/readyz`)).ok) break
      } catch {
        /* not up yet */
      }
      if (i > 300 || child.exitCode !== null) {
        child.kill('SIGKILL')
        throw new Error(`serve did not start: ${stderr}`)
      }
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return {
    base,
    child,
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    kill: async (signal: NodeJS.Signals = 'SIGKILL') => {
      child.kill(signal)
      return exited
    },
  }
}

// Every process whose command line or environment names the folder (as root, /proc shows them all).
export const processesUsing = (marker: string) =>
  readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((pid) => {
      for (const file of ['cmdline', 'environ']) {
        try {
          if (readFileSync(`/proc/${pid}/${file}`).includes(marker)) return true
        } catch {
          // gone, or not ours to read
        }
      }
      return false
    })
