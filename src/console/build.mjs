// The console as two texts, a script and its stylesheet, bundled and minified for the browser. Both
// build.mjs (which embeds them in the service bundle) and src/api/console.ts (which builds them on
// first request when the service runs from source) call this, so the two serve the same bytes.
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

export const buildConsole = async () => {
  const { outputFiles } = await build({
    entryPoints: [fileURLToPath(new URL('main.ts', import.meta.url))],
    bundle: true,
    minify: true,
    format: 'iife',
    target: 'es2022',
    outdir: 'console',
    write: false,
    logLevel: 'warning',
  })
  const text = (ext) => outputFiles.find((f) => f.path.endsWith(ext)).text
  return { script: text('.js'), style: text('.css') }
}
