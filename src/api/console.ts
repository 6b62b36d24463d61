import { route, type Route } from '../route.ts'

// The console (src/console/) is browser code that calls the public API with the key the
// user enters; these routes only serve its page, script and stylesheet, with no access to
// any account's data.

interface Assets {
  script: string
  style: string
}

// The bundle carries the built console in __CONSOLE__ (see build.mjs). From source it is built
// once, on first request, by src/console/build.mjs with esbuild (a dev dependency): loaded
// by its path, so that neither the server's type check nor its bundle takes in the browser
// code or the builder.
declare const __CONSOLE__: Assets | undefined

const fromSource = async (): Promise<Assets> => {
  const builder = new URL('../console/build.mjs', import.meta.url).href
  const { buildConsole } = await import(builder)
  return buildConsole()
}
let assets: Promise<{ script: Buffer; style: Buffer }> | undefined
// Kept as bytes, so the adapter does not measure and encode the text on every request.
const built = () =>
  (assets ??= (
    typeof __CONSOLE__ !== 'undefined' ? Promise.resolve(__CONSOLE__) : fromSource()
  ).then((a) => ({
    script: Buffer.from(a.script),
    style: Buffer.from(a.style),
  })))

// The page may load and call only this service, and no other site may frame it: the key it holds
// can read every customer of its account.
const HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  // The script and stylesheet change with each release under the same names.
  'cache-control': 'no-cache',
}

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Console · Customer and contact data service</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/console.css">
<script src="/console/console.js" defer></script>
</head>
<body>
<div id="app"></div>
<noscript>The console needs JavaScript.</noscript>
</body>
</html>
`

const HTML = 'text/html; charset=utf-8'
const JS = 'text/javascript; charset=utf-8'
const CSS = 'text/css; charset=utf-8'

export const consoleRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/console',
    auth: 'none',
    name: 'get-console',
    tag: 'operations',
    reply: { status: 200, media: HTML },
    summary:
      'The web console: customers with a service key, accounts and their settings with the admin token',
    handler: () => ({ status: 200, headers: { ...HEADERS, 'content-type': HTML }, body: page }),
  }),
  route({
    method: 'GET',
    path: '/console/console.js',
    auth: 'none',
    name: 'get-console-script',
    tag: 'operations',
    reply: { status: 200, media: JS },
    summary: "The console's script",
    handler: async () => ({
      status: 200,
      headers: { ...HEADERS, 'content-type': JS },
      body: (await built()).script,
    }),
  }),
  route({
    method: 'GET',
    path: '/console/console.css',
    auth: 'none',
    name: 'get-console-style',
    tag: 'operations',
    reply: { status: 200, media: CSS },
    summary: "The console's stylesheet",
    handler: async () => ({
      status: 200,
      headers: { ...HEADERS, 'content-type': CSS },
      body: (await built()).style,
    }),
  }),
]
