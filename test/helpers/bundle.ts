import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freshDatabase } from './db.ts'

// npm test builds dist/service.mjs first; here it runs alone in a folder with no node_modules.
export const bundleAlone = () => {
  assert.ok(existsSync('dist/service.mjs'), 'dist/service.mjs is missing: run npm run build')
  const dir = mkdtempSync(join(tmpdir(), 'service-bundle-'))
  copyFileSync('dist/service.mjs', join(dir, 'service.mjs'))
  assert.deepEqual(readdirSync(dir), ['service.mjs'])
  return dir
}

// The bundle alone serving on a port it picks, against a fresh database. stop() sends SIGTERM and
// answers the exit code, then removes the database and the folder.
export const serveBundle = async (env: Record<string, string> = {}) => {
  const dir = bundleAlone()
  const db = await freshDatabase()
  const child = spawn(process.execPath, ['service.mjs', 'serve'], {
    cwd: dir,
    env: { PATH: process.env.PATH, DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', ...env },
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  let out = ''
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM')
    const code = await exited
    await db.drop()
    rmSync(dir, { recursive: true, force: true })
    return code
  }
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.stderr.on('data', (d) => {
        out += d
        const m = /"msg":"listening","port":(\d+)/.exec(out)
        if (m) resolve(Number(m[1]))
      })
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)))
    })
    return { base: `http://127.0.0.1:${port}`, output: () => out, stop }
  } catch (err) {
    await stop()
    throw err
  }
}
