import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { route, type Route } from '../route.ts'

// The bundle carries the renderer in __DOCS_SCRIPT__ (see build.mjs); from source it is read from
// node_modules when the page is first asked for, so a process that nobody browses never loads
// a few MB of browser code.
declare const __DOCS_SCRIPT__: string | undefined

const SCRIPT = '@scalar/api-reference/browser/standalone.js'
let script: Buffer | undefined
// Kept as bytes: the adapter would otherwise measure and encode a few MB of text on every request.
const reference = () =>
  (script ??=
    typeof __DOCS_SCRIPT__ !== 'undefined'
      ? Buffer.from(__DOCS_SCRIPT__)
      : readFileSync(createRequire(import.meta.url).resolve(SCRIPT)))

// Everything the page loads comes from this service, so it works on a host without internet access:
// no web fonts, and none of Scalar's hosted extras (its client app, AI agent, sharing and
// request proxy), which would send the document or requests elsewhere. "Test request" stays:
// it calls this service.
const config = {
  url: '/openapi.json',
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  telemetry: false,
}

const start = `Scalar.createApiReference('#reference', ${JSON.stringify(config)})`

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference · Customer and contact data service</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="reference"></div>
<script src="/docs/reference.js"></script>
<script>${start}</script>
</body>
</html>
`

// As strict as the renderer allows (test/docs.test.ts renders the page under it in Chromium). The
// page may load and call only this service (the document, and "Test request"), and no other site
// may frame it. Scripts: the renderer and the one start line above, by its hash; no 'unsafe-eval'
// (the bundle's zod tries `new Function` once and interprets its validators when refused). Styles
// need 'unsafe-inline': Scalar inserts its stylesheet and the theme it builds at run time as
// <style> elements and sets style attributes, which no hash can name; a style cannot run script.
const HEADERS = {
  'content-security-policy': [
    "default-src 'none'",
    `script-src 'self' 'sha256-${createHash('sha256').update(start).digest('base64')}'`,
    "style-src 'self' 'unsafe-inline'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
}

export const docsRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/docs',
    auth: 'none',
    name: 'get-docs',
    tag: 'operations',
    reply: { status: 200, media: 'text/html; charset=utf-8' },
    summary: 'This API as a browsable reference page, rendered from /openapi.json',
    handler: () => ({
      status: 200,
      headers: { ...HEADERS, 'content-type': 'text/html; charset=utf-8' },
      body: page,
    }),
  }),
  route({
    method: 'GET',
    path: '/docs/reference.js',
    auth: 'none',
    name: 'get-docs-script',
    tag: 'operations',
    reply: { status: 200, media: 'text/javascript; charset=utf-8' },
    summary: 'The script that renders /docs (Scalar API Reference)',
    handler: () => ({
      status: 200,
      headers: {
        ...HEADERS,
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'public, max-age=86400',
      },
      body: reference(),
    }),
  }),
]
