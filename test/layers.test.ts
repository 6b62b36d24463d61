// The layers of docs/architecture.md run one way: a file imports only from its own layer or the
// layers below it. Read from the import statements of src/, so a new upward import fails here.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { test } from 'node:test'

const LAYERS: [name: string, paths: RegExp][] = [
  ['base', /^src\/(context|errors|dates|values|validate|config|log|catalog|route)\.ts$|^src\/db\//],
  ['pure', /^src\/(search\/|metrics\.ts$|uploads\/lifecycle\.ts$|scoring\/(model|score|sql|explain|alerts)\.ts$)/],
  // The pure files of scoring/ match the line above first.
  [
    'modules',
    /^src\/(accounts|catalog|uploads|tracking|webhooks|admin|import|records|segments|notifications|scoring)\//,
  ],
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
  [...readFileSync(file, 'utf8').matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^import\s+)'(\.[^']+)'/gm)].map((m) =>
    normalize(join(dirname(file), m[1])),
  )

const graph = files('src').map((file) => ({ file, imports: importsOf(file) }))

test('every source file belongs to one layer', () => {
  for (const { file } of graph) layerOf(file)
})

test('imports only point down the layers', () => {
  const upward = graph.flatMap(({ file, imports }) =>
    imports.filter((to) => layerOf(to) > layerOf(file)).map((to) => `${file} -> ${to} (${LAYERS[layerOf(to)][0]})`),
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
    ({ file, imports }) => layerOf(file) < EDGES && imports.some((to) => to.startsWith('src/http/')),
  )
  assert.deepEqual(
    users.map((u) => u.file),
    [],
  )
})

test('the check sees an upward import', () => {
  // The rule itself, on a made-up edge: a domain file importing an HTTP helper.
  assert.ok(layerOf('src/http/request.ts') > layerOf('src/uploads/receive.ts'))
  assert.ok(importsOf('src/api/routes.ts').includes('src/records/routes.ts'))
})
