// A headless Chromium for the browser tests: Debian's chromium package driven by playwright-core,
// since this machine and CI reach Debian's and npm's registries but no browser download host.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'

export const CHROMIUM = '/usr/bin/chromium'

// Without the background-networking switches Chromium keeps calling Google's hosts, which this
// network refuses, slowing every page.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

// Test files run at once, and each may find no browser: an apt-get that finds another holding the
// package lock waits for it (then finds chromium installed) instead of failing.
const apt = (...args: string[]) =>
  execFileSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  })

// A fresh CI machine has no browser: as root the package is installed (with a package list fetched
// first when the local one does not know it); otherwise the message says what to install.
const ensureChromium = () => {
  if (existsSync(CHROMIUM)) return
  if (process.getuid?.() !== 0) {
    throw new Error(
      `The browser tests need ${CHROMIUM}: install Debian's chromium package (apt-get install chromium).`,
    )
  }
  try {
    apt('install', '-y', 'chromium')
  } catch {
    if (existsSync(CHROMIUM)) return
    apt('update')
    apt('install', '-y', 'chromium')
  }
  if (!existsSync(CHROMIUM))
    throw new Error(`apt-get installed chromium, but ${CHROMIUM} is still missing.`)
}

export interface Browser {
  context: BrowserContext
  close: () => Promise<void>
}

// Each launch gets its own profile folder (a persistent context is how Playwright takes
// one), removed on close.
export const launchBrowser = async (): Promise<Browser> => {
  ensureChromium()
  const profile = mkdtempSync(join(tmpdir(), 'service-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    acceptDownloads: true,
    viewport: { width: 1280, height: 900 },
  })
  return {
    context,
    close: async () => {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
    },
  }
}
