// Aggregates of the customers a search matches, for dashboards (docs/api.md, "Aggregates"): the
// body, and the answer assembled from the statements of src/search/aggregate.ts.
import * as v from 'valibot'
import type { App } from '../context.ts'
import { budgeted, type Caller, type Track } from '../db/budget.ts'
import type { Tx } from '../db/client.ts'
import { today } from '../dates.ts'
import {
  type AggregateInput,
  compileHistogram,
  compilePoints,
  compileSummary,
  DEFAULT_BUCKETS,
  GRID,
  isPoint,
  MAX_BUCKETS,
  MAX_CELLS,
  MAX_FIELDS,
  MAX_POINTS,
  type Range,
} from '../search/aggregate.ts'
import { CORE_FIELDS } from '../search/fields.ts'
import type { CompiledSearch } from '../search/sql.ts'
import { conditions, conditionsOf, oneCondition } from './search-body.ts'
import { searchContext } from './search.ts'

const FIELDS =
  `Number fields (core scores, number attributes, number metrics of the latest snapshot) to
answer the count, average, minimum, maximum and histogram of, in this order.`.replaceAll('\n', ' ')
const MATRIX =
  `Engagement x fit of the matches scored on both: "grid", ${GRID} x ${GRID} counts over -100 to 100;
"points", up to \`points\` of them, sampled by the MD5 of their external id beyond that.`.replaceAll(
    '\n',
    ' ',
  )

const wholeUpTo = (max: number, description: string) =>
  v.pipe(
    v.number(),
    v.integer('Must be an integer.'),
    v.minValue(1, 'At least 1.'),
    v.maxValue(max, `At most ${max}.`),
    v.description(description),
  )

const AggregateFields = oneCondition({
  ...conditions,
  fields: v.optional(
    v.pipe(
      v.array(v.string()),
      v.maxLength(MAX_FIELDS, `At most ${MAX_FIELDS} fields.`),
      v.description(FIELDS),
    ),
  ),
  buckets: v.optional(
    wholeUpTo(MAX_BUCKETS, `Histogram buckets per field (default ${DEFAULT_BUCKETS}).`),
  ),
  matrix: v.optional(
    v.pipe(v.picklist(['grid', 'points'], 'Must be "grid" or "points".'), v.description(MATRIX)),
  ),
  points: v.optional(
    wholeUpTo(MAX_POINTS, `The most points answered with matrix "points" (default ${MAX_POINTS}).`),
  ),
})
// The groups an aggregate counts: every field's histogram buckets, and the grid's cells.
const cells = (b: { fields?: string[]; buckets?: number; matrix?: string }) =>
  (b.fields ?? []).length * (b.buckets ?? DEFAULT_BUCKETS) + (b.matrix === 'grid' ? GRID * GRID : 0)
export const AggregateBody = v.pipe(
  AggregateFields,
  v.forward(
    v.partialCheck(
      [['buckets'], ['fields']],
      (b) => b.buckets === undefined || (b.fields ?? []).length > 0,
      'Only with fields.',
    ),
    ['buckets'],
  ),
  v.forward(
    v.partialCheck(
      [['buckets'], ['fields'], ['matrix']],
      (b) => cells(b) <= MAX_CELLS,
      `Fields times buckets (plus ${GRID * GRID} with matrix "grid") must be at most ${MAX_CELLS}.`,
    ),
    ['buckets'],
  ),
  v.forward(
    v.partialCheck(
      [['points'], ['matrix']],
      (b) => b.points === undefined || b.matrix === 'points',
      'Only with matrix "points".',
    ),
    ['points'],
  ),
  // Open, as the body's own additionalProperties already names every key (and documentation
  // linters read a schema with properties and no additionalProperties as closed).
  v.metadata({
    dependentSchemas: {
      buckets: {
        required: ['fields'],
        properties: { fields: { type: 'array', minItems: 1 } },
        additionalProperties: true,
      },
      points: {
        required: ['matrix'],
        properties: { matrix: { const: 'points' } },
        additionalProperties: true,
      },
    },
  }),
)
export type AggregateBody = v.InferOutput<typeof AggregateBody>

type Row = Record<string, any>

// Each field's statistics, and the ranges its histogram spans (none without two distinct values).
const statsOf = (total: Row, count: number) =>
  Array.from({ length: count }, (_, i) => {
    const [min, max] = [total[`min${i}`] as string | null, total[`max${i}`] as string | null]
    return {
      n: total[`n${i}`] as number,
      avg: total[`avg${i}`] as number | null,
      range: min === null || max === null ? undefined : ({ min, max } as Range),
    }
  })

const histogram = (
  range: Range | undefined,
  n: number,
  buckets: number,
  counts: Map<number, number>,
) => {
  if (!range) return []
  const [lo, hi] = [Number(range.min), Number(range.max)]
  if (isPoint(range)) return [{ from: lo, to: hi, count: n }]
  const edge = (k: number) => (k === buckets ? hi : lo + ((hi - lo) * k) / buckets)
  return Array.from({ length: buckets }, (_, k) => ({
    from: edge(k),
    to: edge(k + 1),
    count: counts.get(k + 1) ?? 0,
  }))
}

const gridOf = (rows: Row[]) => {
  const counts = Array.from({ length: GRID }, () => new Array<number>(GRID).fill(0))
  const probabilities = Array.from({ length: GRID }, () =>
    new Array<number | null>(GRID).fill(null),
  )
  let scored = 0
  for (const row of rows) {
    if (row.total || row.x === null || row.y === null) continue
    counts[row.x][row.y] = Number(row.count)
    probabilities[row.x][row.y] = row.churn_probability as number | null
    scored += Number(row.count)
  }
  return { scored, counts, churn_probability: probabilities }
}

// The answer: count, fields, and grid or points when asked, under the aggregate budget
// (db/budget.ts).
export const aggregate = (app: App, accountId: number, body: AggregateBody, caller?: Caller) =>
  budgeted(app, caller, 'aggregate', (tx, track) => answer(tx, track, accountId, body))

const answer = async (tx: Tx, track: Track, accountId: number, body: AggregateBody) => {
  const run = (query: CompiledSearch) => track(tx.unsafe(query.text, query.params as string[]))
  const fields = body.fields ?? []
  // Custom codenames among the fields need the catalog, as a search's properties do.
  const custom = fields.filter((f) => !CORE_FIELDS.customer.has(f))
  const context = await searchContext(tx, accountId, 'customer', {
    filters: body.filters,
    where: body.where,
    properties: custom.length > 0 ? custom : undefined,
  })
  const input: AggregateInput = {
    entity: 'customer',
    accountId,
    catalog: context.catalog,
    lookups: context.lookups,
    ...conditionsOf(body),
    fields,
    matrix: body.matrix,
    today: today(),
  }
  const limit = body.points ?? MAX_POINTS
  const summary = compileSummary(input)
  const points = body.matrix === 'points' ? compilePoints(input, limit) : undefined
  const rows = await run(summary)
  const sample = points && (await run(points))
  const total = rows.find((r) => body.matrix !== 'grid' || r.total)!
  const stats = statsOf(total, fields.length)
  const buckets = body.buckets ?? DEFAULT_BUCKETS
  const ranges = stats.map((s) => s.range)
  const counts = stats.map(() => new Map<number, number>())
  if (ranges.some((r) => r && !isPoint(r))) {
    for (const row of await run(compileHistogram(input, ranges, buckets)))
      counts[row.i].set(row.bucket, Number(row.count))
  }
  return {
    count: total.count as number,
    fields: fields.map((field, i) => ({
      field,
      count: stats[i].n,
      avg: stats[i].avg,
      min: stats[i].range ? Number(stats[i].range.min) : null,
      max: stats[i].range ? Number(stats[i].range.max) : null,
      histogram: histogram(stats[i].range, stats[i].n, buckets, counts[i]),
    })),
    ...(body.matrix === 'grid' && { grid: gridOf(rows) }),
    ...(sample && {
      points: {
        scored: Number(total.scored),
        sampled: Number(total.scored) > sample.length,
        items: [...sample],
      },
    }),
  }
}
