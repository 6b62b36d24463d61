import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { launchBrowser } from './helpers/browser.ts'
import { serveBundle } from './helpers/bundle.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const renderer = readFileSync(
  createRequire(import.meta.url).resolve('@scalar/api-reference/browser/standalone.js'),
)

let s: TestService
before(async () => {
  s = await startTestService({}, { http: true, worker: false })
})
after(() => s?.stop())

test('GET /docs is a page that renders /openapi.json with the script this service serves', async () => {
  const res = await s.call('GET', '/docs')
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type')!, /^text\/html; charset=utf-8$/)
  const html: string = res.body
  assert.match(html, /<meta charset="utf-8">/)
  assert.match(html, /<title>[^<]+<\/title>/)
  assert.match(html, /<script src="\/docs\/reference\.js"><\/script>/)
  assert.match(html, /"url":"\/openapi\.json"/)
  // Offline: nothing is loaded from another host, and the renderer's web fonts are off.
  const loads = [...html.matchAll(/<(script|link|img|iframe)\b[^>]*>/g)].map((m) => m[0])
  assert.ok(loads.length >= 2, loads.join('\n'))
  for (const tag of loads) {
    for (const [, url] of tag.matchAll(/\b(?:src|href)="([^"]*)"/g)) {
      assert.match(url, /^(\/(?!\/)|data:)/, `${tag} loads from another host`)
    }
  }
  assert.doesNotMatch(html, /(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i)
  assert.match(html, /"withDefaultFonts":false/)
})

// The page may load and call only this service, run no script but the renderer and its one start
// line, and be framed by no site.
const assertPolicy = (headers: Headers) => {
  const policy = headers.get('content-security-policy') ?? ''
  const directives = new Map(
    policy.split(/;\s*/).map((d) => [d.split(' ')[0], d.split(' ').slice(1)]),
  )
  assert.deepEqual(directives.get('default-src'), ["'none'"], policy)
  assert.deepEqual(directives.get('connect-src'), ["'self'"], policy)
  assert.deepEqual(directives.get('frame-ancestors'), ["'none'"], policy)
  const scripts = directives.get('script-src') ?? []
  assert.equal(scripts[0], "'self'", policy)
  assert.ok(
    scripts.slice(1).every((source) => /^'sha256-[A-Za-z0-9+/]+={0,2}'$/.test(source)),
    policy,
  )
  assert.equal(headers.get('x-content-type-options'), 'nosniff')
  assert.equal(headers.get('referrer-policy'), 'no-referrer')
}

test('GET /docs and its script carry a content security policy, nosniff and no referrer', async () => {
  for (const path of ['/docs', '/docs/reference.js'])
    assertPolicy((await fetch(`${s.base}${path}`)).headers)
})

interface Violation {
  directive: string
  blocked: string
  source: string
}

// Scalar's bundle includes zod, which tries `new Function('')` once to learn whether it may
// compile its validators, and interprets them when the policy says no: that refused probe is
// the one report expected.
const zodProbe = (v: Violation) =>
  v.directive === 'script-src' && v.blocked === 'eval' && v.source.endsWith('/docs/reference.js')

test('/docs in Chromium: the operations render under its policy, Test Request works, no site frames it', async () => {
  const browser = await launchBrowser()
  try {
    const page = await browser.context.newPage()
    const violations: Violation[] = []
    const problems: string[] = []
    await page.exposeFunction('reportViolation', (v: Violation) => violations.push(v))
    await page.addInitScript(() =>
      document.addEventListener('securitypolicyviolation', (e) =>
        (window as unknown as { reportViolation: (v: Violation) => void }).reportViolation({
          directive: e.effectiveDirective,
          blocked: e.blockedURI,
          source: e.sourceFile,
        }),
      ),
    )
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
    page.on('console', (msg) => msg.type() === 'error' && problems.push(`console: ${msg.text()}`))
    page.on(
      'request',
      (req) => !req.url().startsWith(`${s.base}/`) && problems.push(`request ${req.url()}`),
    )
    await page.goto(`${s.base}/docs`)

    const openapi = (await s.call('GET', '/openapi.json')).body
    const operations = Object.values(
      openapi.paths as Record<string, Record<string, { summary: string; tags: string[] }>>,
    )
      .flatMap((path) => Object.values(path))
      .filter((operation) => operation.tags.includes('search'))
    assert.ok(operations.length >= 2)
    for (const { summary } of operations)
      await page.getByText(summary, { exact: true }).first().waitFor()

    await page.getByText(operations[0].summary, { exact: true }).first().click()
    await page
      .getByRole('button', { name: /^Test Request/ })
      .first()
      .click()
    const [answer] = await Promise.all([
      page.waitForResponse((res) => res.url().startsWith(`${s.base}/api/v1/`)),
      page.getByRole('button', { name: /^Send Request/ }).click(),
    ])
    assert.equal(answer.status(), 401)
    assert.deepEqual(
      violations.filter((v) => !zodProbe(v)),
      [],
    )
    // Chromium logs the 401 it just got as an error; anything else logged as one is a problem.
    assert.deepEqual(
      problems.filter((p) => !p.includes('status of 401 (Unauthorized)')),
      [],
    )

    const framing = await browser.context.newPage()
    await Promise.all([
      framing.waitForEvent('console', (msg) => /frame-ancestors 'none'/.test(msg.text())),
      framing.setContent(`<iframe src="${s.base}/docs"></iframe>`),
    ])
    assert.match(framing.frames()[1].url(), /^chrome-error:/)
  } finally {
    await browser.close()
  }
})

test('GET /docs/reference.js is the renderer, cacheable', async () => {
  const res = await fetch(`${s.base}/docs/reference.js`)
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'text/javascript; charset=utf-8')
  assert.equal(res.headers.get('cache-control'), 'public, max-age=86400')
  const body = Buffer.from(await res.arrayBuffer())
  assert.ok(body.length > 100_000, `${body.length} bytes`)
  assert.ok(body.equals(renderer), 'the body is not the renderer file')
  assert.match(body.toString('utf8'), /createApiReference/)
})

// A stretch of the renderer that esbuild prints verbatim inside a string literal (no quote,
// backslash, template or non-ASCII character), long enough to be found nowhere else.
const fingerprint = () => {
  const runs = renderer.toString('utf8').match(/[A-Za-z0-9 _.,:;=+*<>!?&|()[\]{}-]{200,}/g) ?? []
  assert.ok(runs.length, 'no plain stretch in the renderer')
  return runs.reduce((a, b) => (b.length > a.length ? b : a))
}

test('the single-file bundle carries the renderer and serves it without node_modules', async () => {
  // npm test builds dist/service.mjs first, as test/build.test.ts assumes.
  assert.ok(existsSync('dist/service.mjs'), 'dist/service.mjs is missing: run npm run build')
  const bundle = readFileSync('dist/service.mjs', 'utf8')
  assert.ok(bundle.includes(fingerprint()), "the bundle does not contain the renderer's script")

  const served = await serveBundle()
  try {
    const page = await fetch(`${served.base}/docs`)
    assert.equal(page.status, 200)
    assertPolicy(page.headers)
    assert.match(await page.text(), /\/docs\/reference\.js/)
    const res = await fetch(`${served.base}/docs/reference.js`)
    assert.equal(res.status, 200)
    assert.ok(
      Buffer.from(await res.arrayBuffer()).equals(renderer),
      'the bundle serves another script',
    )
  } finally {
    await served.stop()
  }
})
