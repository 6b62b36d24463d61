import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { serveBundle } from './helpers/bundle.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const renderer = readFileSync(createRequire(import.meta.url).resolve('@scalar/api-reference/browser/standalone.js'))

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
      assert.match(url, /^\/(?!\/)/, `${tag} loads from another host`)
    }
  }
  assert.doesNotMatch(html, /(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i)
  assert.match(html, /"withDefaultFonts":false/)
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

// A stretch of the renderer that esbuild prints verbatim inside a string literal (no quote, backslash,
// template or non-ASCII character), long enough to be found nowhere else.
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
    assert.match(await page.text(), /\/docs\/reference\.js/)
    const res = await fetch(`${served.base}/docs/reference.js`)
    assert.equal(res.status, 200)
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(renderer), 'the bundle serves another script')
  } finally {
    await served.stop()
  }
})
