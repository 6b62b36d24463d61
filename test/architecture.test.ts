// The claims of docs/architecture.md that a test can check, read from the source itself: the layers
// run one way (a file imports only from its own layer or the layers below it), no folders import
// each other in a circle, only the folders the page names touch a table, no route handler runs SQL,
// no two server files export the same name, and the folder diagram is `ls src`.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { test } from 'node:test'

const MODULES = [
  'accounts',
  'catalog',
  'uploads',
  'tracking',
  'webhooks',
  'import',
  'records',
  'segments',
].concat(['notifications', 'scoring', 'privacy', 'insights', 'backups', 'audit', 'people', 'churn'])
const LAYERS: [name: string, paths: RegExp][] = [
  [
    'base',
    /^src\/(context|errors|dates|values|validate|config|log|property|route)\.ts$|^src\/db\//,
  ],
  ['pure', /^src\/(search\/|metrics\.ts$|uploads\/lifecycle\.ts$|scoring\/rules\/|learn\/)/],
  // scoring/rules/ and uploads/lifecycle.ts match the line above first.
  ['modules', new RegExp(`^src/(${MODULES.join('|')})/`)],
  ['edges', /^src\/(http|api|jobs|console)\//],
  ['entry', /^src\/cli\/|^src\/service\.ts$/],
]
// Within the edges: http/ is the generic adapter and knows no route or task; jobs/ knows no HTTP;
// console/ is browser code that reaches the server through the public API only.
const FORBIDDEN: [from: RegExp, to: RegExp][] = [
  [/^src\/console\//, /^src\/(?!console\/)/],
  [/^src\/http\//, /^src\/(api|jobs)\//],
  [/^src\/jobs\//, /^src\/(http|api)\//],
  [/^src\/api\//, /^src\/jobs\//],
]

const EDGES = LAYERS.findIndex(([name]) => name === 'edges')

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )

const layerOf = (file: string) => {
  const i = LAYERS.findIndex(([, paths]) => paths.test(file))
  assert.ok(i >= 0, `${file} belongs to no layer: add it to LAYERS and docs/architecture.md`)
  return i
}

// Static imports, re-exports and dynamic import() of relative paths.
const importsOf = (file: string) =>
  [
    ...readFileSync(file, 'utf8').matchAll(
      /(?:\bfrom\s+|\bimport\s*\(\s*|^import\s+)'(\.[^']+)'/gm,
    ),
  ].map((m) => normalize(join(dirname(file), m[1])))

const graph = files('src').map((file) => ({ file, imports: importsOf(file) }))

test('every source file belongs to one layer', () => {
  for (const { file } of graph) layerOf(file)
})

test('imports only point down the layers', () => {
  const upward = graph.flatMap(({ file, imports }) =>
    imports
      .filter((to) => layerOf(to) > layerOf(file))
      .map((to) => `${file} -> ${to} (${LAYERS[layerOf(to)][0]})`),
  )
  assert.deepEqual(upward, [])
})

test('within the edges, http/ knows no routes or tasks and jobs/ no HTTP', () => {
  const crossing = graph.flatMap(({ file, imports }) =>
    imports
      .filter((to) => FORBIDDEN.some(([from, target]) => from.test(file) && target.test(to)))
      .map((to) => `${file} -> ${to}`),
  )
  assert.deepEqual(crossing, [])
})

// Modules write route rows with src/route.ts and throw Refusals; only the edge and entry run HTTP.
test('below the edges, no file imports from http/', () => {
  const users = graph.filter(
    ({ file, imports }) =>
      layerOf(file) < EDGES && imports.some((to) => to.startsWith('src/http/')),
  )
  assert.deepEqual(
    users.map((u) => u.file),
    [],
  )
})

// Pure code computes and builds SQL text: it may read the base and other pure files, never a
// module, whose functions run SQL (scoring's formulas sit in scoring/rules/ for that reason).
const PURE = LAYERS.findIndex(([name]) => name === 'pure')
const MODULE = LAYERS.findIndex(([name]) => name === 'modules')
const moduleImports = (file: string, imports: string[]) =>
  layerOf(file) === PURE ? imports.filter((to) => layerOf(to) === MODULE) : []

test('a pure file imports no module', () => {
  assert.ok(graph.filter(({ file }) => layerOf(file) === PURE).length > 10)
  assert.deepEqual(
    graph.flatMap(({ file, imports }) =>
      moduleImports(file, imports).map((to) => `${file} -> ${to}`),
    ),
    [],
  )
  assert.deepEqual(
    moduleImports('src/scoring/rules/score.ts', ['src/scoring/batch.ts', 'src/dates.ts']),
    ['src/scoring/batch.ts'],
  )
})

test('the check sees an upward import', () => {
  // The rule itself, on a made-up edge: a domain file importing an HTTP helper.
  assert.ok(layerOf('src/http/request.ts') > layerOf('src/uploads/receive.ts'))
  assert.ok(importsOf('src/api/routes.ts').includes('src/records/routes.ts'))
})

const DOC = readFileSync('docs/architecture.md', 'utf8')

const server = files('src').filter((f) => !f.startsWith('src/console/'))
const source = new Map(files('src').map((f) => [f, readFileSync(f, 'utf8')]))
const code = (file: string) => source.get(file)!.replace(/^\s*\/\/.*$/gm, '')

// A file's folder under src/, or the file itself at the top.
const folder = (file: string) => file.split('/').slice(0, 2).join('/')
// A file's home for the cycle check: its folder within its layer (scoring/rules/ holds the pure
// formulas of the module that runs them, webhooks/ imports the rules and scoring/ imports
// webhooks/), and the base layer is one home, the ground every layer stands on (context.ts names
// db/'s pool, db/ takes the App of context.ts).
const home = (file: string) =>
  layerOf(file) === 0
    ? 'src/base'
    : `${folder(file)}${LAYERS[layerOf(file)][0] === 'pure' ? ' (pure)' : ''}`

// home -> the homes it imports from.
const edges = new Map<string, Set<string>>()
for (const { file, imports } of graph)
  for (const to of imports)
    if (home(to) !== home(file))
      edges.set(home(file), (edges.get(home(file)) ?? new Set()).add(home(to)))

const cycleFrom = (start: string): string[] | undefined => {
  const walk = (at: string, path: string[], seen: Set<string>): string[] | undefined => {
    for (const next of edges.get(at) ?? []) {
      if (next === start) return [...path, next]
      if (seen.has(next)) continue
      seen.add(next)
      const found = walk(next, [...path, next], seen)
      if (found) return found
    }
  }
  return walk(start, [start], new Set())
}

test('no folder imports another in a circle, directly or through others', () => {
  const cycles = [...edges.keys()].flatMap((h) => cycleFrom(h)?.join(' -> ') ?? [])
  assert.deepEqual(cycles, [])
})

test('the cycle check sees a circle', () => {
  edges.set('src/a', new Set(['src/b']))
  edges.set('src/b', new Set(['src/c']))
  edges.set('src/c', new Set(['src/a']))
  assert.deepEqual(cycleFrom('src/a'), ['src/a', 'src/b', 'src/c', 'src/a'])
  for (const h of ['src/a', 'src/b', 'src/c']) edges.delete(h)
})

// The table of "Who touches which table" in docs/architecture.md: | `table` | `folder/`
// `file.ts` ... |
const owners = new Map(
  [...DOC.matchAll(/^\| `([a-z_]+)` \| (.+) \|$/gm)].map(([, table, homes]) => [
    table,
    [...homes.matchAll(/`([^`]+)`/g)].map(([, h]) => `src/${h.replace(/\/$/, '')}`),
  ]),
)
const TABLES = [
  ...new Set(
    readdirSync('sql').flatMap((f) =>
      [
        ...readFileSync(join('sql', f), 'utf8').matchAll(
          /create table (?:if not exists )?([a-z_]+)/gi,
        ),
      ].map((m) => m[1]),
    ),
  ),
].sort()
// A table named in SQL text: after from, join, into, update, or "delete from".
const touches = (text: string, table: string) =>
  new RegExp(`\\b(from|join|into|update)\\s+(only\\s+)?${table}\\b(?!\\.)`, 'i').test(text)

test('the table of owners names every table', () => {
  assert.deepEqual([...owners.keys()].sort(), TABLES)
})

test('only the folders docs/architecture.md names touch a table in their SQL', () => {
  const strays = server.flatMap((file) =>
    TABLES.filter(
      (t) => touches(code(file), t) && !owners.get(t)?.some((h) => folder(file) === h),
    ).map((t) => `${file} touches ${t}`),
  )
  assert.deepEqual(strays, [])
})

test('the owner check sees SQL of a table', () => {
  assert.ok(touches('select 1 from\n  customers c', 'customers'))
  assert.ok(touches('insert into notifications (x)', 'notifications'))
  assert.ok(!touches('from customers_x', 'customers'))
})

// Route rows (src/*/routes.ts) and the edge (src/api/) call module functions; SQL lives
// in the modules.
const SQL_CALL = /\b(sql|tx|heavy)\s*`|\.unsafe\(|\bsql\.begin\(/

test('no route handler runs SQL itself', () => {
  const handlers = server.filter((f) => f.startsWith('src/api/') || f.endsWith('/routes.ts'))
  assert.ok(handlers.length > 5, handlers.join())
  assert.deepEqual(
    handlers.filter((f) => SQL_CALL.test(code(f))),
    [],
  )
})

const EXPORTED = /^export (?:async )?(?:const|function|class) ([A-Za-z_$][\w$]*)/gm

// The console is a program of its own (the browser's), whose API calls may share an
// operation's name.
test('no two files of the server export the same name', () => {
  const byName = new Map<string, string[]>()
  for (const file of server)
    for (const [, name] of source.get(file)!.matchAll(EXPORTED))
      byName.set(name, [...(byName.get(name) ?? []), file])
  const shared = [...byName]
    .filter(([, where]) => where.length > 1)
    .map(([name, where]) => `${name}: ${where}`)
  assert.deepEqual(shared, [])
})

test('the folder diagram of docs/architecture.md is `ls src`', () => {
  const diagram = /```text\nsrc\/\n([\s\S]*?)```/.exec(DOC)
  assert.ok(diagram, 'docs/architecture.md has a ```text block starting with src/')
  const drawn = [...diagram[1].matchAll(/^[\s│├└─]*([\w.-]+\/?)/gm)].map((m) =>
    m[1].replace(/\/$/, ''),
  )
  assert.deepEqual(drawn.sort(), readdirSync('src').sort())
})

// Handlers receive typed input (src/route.ts): nothing under src/ casts it back, or casts to never.
const CASTS = /req\.input as|req\.queryInput as|as never\b|req\.auth!/

test('no cast of a request input, no cast to never', () => {
  assert.deepEqual(
    server.filter((f) => CASTS.test(code(f))),
    [],
  )
  assert.ok(CASTS.test('const x = req.input as Body') && CASTS.test('y as never'))
})

// One home per mechanism (issue 46, item 4): graphile-worker's tables are named in db/jobs.ts (the
// jobs added) and db/queue.ts (everything else read or changed in its schema), nowhere else.
const WORKER_TABLES = /\bgraphile_worker\./
const QUEUE_HOMES = ['src/db/jobs.ts', 'src/db/queue.ts']

test("only db/jobs.ts and db/queue.ts name graphile-worker's schema", () => {
  assert.deepEqual(
    server.filter((f) => !QUEUE_HOMES.includes(f) && WORKER_TABLES.test(code(f))),
    [],
  )
  assert.ok(WORKER_TABLES.test('select 1 from graphile_worker._private_jobs'))
  assert.ok(QUEUE_HOMES.every((f) => WORKER_TABLES.test(code(f))))
})

// Advisory-lock keys are written in db/locks.ts alone: two spellings of one key lock nothing.
const ADVISORY = /\bhashtext(extended)?\s*\(|\bpg_(try_)?advisory_|locktype\s*=\s*'advisory'/

test('only db/locks.ts writes an advisory-lock key', () => {
  assert.deepEqual(
    server.filter((f) => f !== 'src/db/locks.ts' && ADVISORY.test(code(f))),
    [],
  )
  assert.ok(ADVISORY.test("select pg_advisory_xact_lock(hashtextextended('x', 0))"))
  assert.ok(ADVISORY.test(code('src/db/locks.ts')))
})

// Biome's linter finds unused imports and variables but not exports: a name exported from src/ is
// used by another file (of src/, test/ or bench/). The exception is in a file that another change
// is splitting (issue 46, item 5: insights/week.ts).
const UNUSED_EXPORT_EXCEPTIONS = ['src/insights/week.ts: QUADRANT_SEARCH']
const ANY_EXPORT =
  /^export (?:async )?(?:const|function|class|type|interface|enum) ([A-Za-z_$][\w$]*)/gm

test('every name src/ exports is used by another file', () => {
  const users = new Map(
    [...files('src'), ...files('test'), ...files('bench')]
      .filter((f) => f !== 'test/architecture.test.ts')
      .map((f) => [f, source.get(f) ?? readFileSync(f, 'utf8')]),
  )
  const unused = files('src').flatMap((file) =>
    [...new Set([...source.get(file)!.matchAll(ANY_EXPORT)].map((m) => m[1]))]
      .filter((name) => {
        const used = new RegExp(`(?<![\\w$])${name.replace(/\$/g, '\\$')}(?![\\w$])`)
        return ![...users].some(([other, text]) => other !== file && used.test(text))
      })
      .map((name) => `${file}: ${name}`),
  )
  assert.deepEqual(unused.sort(), UNUSED_EXPORT_EXCEPTIONS)
})

// No vendor in the generic layers: route.ts, http/ and metrics.ts name no ingest's vendor
// ("segment" as Segment's, not the saved segments). The relay's credential is a property of its
// route rows and its counters register from tracking/relay/metrics.ts (issue 46, item 3).
const VENDOR = /\bsegment(?!s\b|s\W| search)/i
const GENERIC = (f: string) =>
  f === 'src/route.ts' || f === 'src/metrics.ts' || f.startsWith('src/http/')

test('route.ts, http/ and metrics.ts name no vendor', () => {
  assert.deepEqual(
    server.filter((f) => GENERIC(f) && VENDOR.test(code(f))),
    [],
  )
  assert.ok(VENDOR.test("segmentWriteKey: 'x'") && VENDOR.test('auth.segment'))
  assert.ok(!VENDOR.test('segments, segment searches'))
})
