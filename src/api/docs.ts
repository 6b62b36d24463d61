import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Route } from '../http/types.ts'

// The bundle carries the renderer in __DOCS_SCRIPT__ (see build.mjs); from source it is read from
// node_modules when the page is first asked for, so a process that nobody browses never loads a few MB
// of browser code.
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
// no web fonts, and none of Scalar's hosted extras (its client app, AI agent, sharing and request proxy),
// which would send the document or requests elsewhere. "Test request" stays: it calls this service.
const config = {
  url: '/openapi.json',
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  telemetry: false,
}

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference · Customer and contact data service</title>
</head>
<body>
<div id="reference"></div>
<script src="/docs/reference.js"></script>
<script>Scalar.createApiReference('#reference', ${JSON.stringify(config)})</script>
</body>
</html>
`

export const docsRoutes: Route[] = [
  {
    method: 'GET',
    path: '/docs',
    auth: 'none',
    name: 'get-docs',
    tag: 'operations',
    reply: { status: 200, media: 'text/html; charset=utf-8' },
    summary: 'This API as a browsable reference page, rendered from /openapi.json',
    handler: () => ({ status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: page }),
  },
  {
    method: 'GET',
    path: '/docs/reference.js',
    auth: 'none',
    name: 'get-docs-script',
    tag: 'operations',
    reply: { status: 200, media: 'text/javascript; charset=utf-8' },
    summary: 'The script that renders /docs (Scalar API Reference)',
    handler: () => ({
      status: 200,
      headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=86400' },
      body: reference(),
    }),
  },
]
