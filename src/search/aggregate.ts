// Aggregates over the records a search matches, for dashboards: their count, statistics and a
// histogram of number fields, and the engagement x fit matrix as a grid of counts (with each cell's
// mean churn probability) or a sample of points. The condition compiles exactly as the search's
// (sql.ts); this file adds the statements around it.
import { lookupField } from './criteria.ts'
import type { FieldError } from '../errors.ts'
import type { Field } from './fields.ts'
import { type Ctx, fieldSql } from './predicates.ts'
import { type CompiledSearch, compileMatch, type MatchInput } from './sql.ts'
import { sqlDoubleOrNull } from '../values.ts'

export const MAX_FIELDS = 10
export const MAX_BUCKETS = 100
export const DEFAULT_BUCKETS = 10
export const MAX_POINTS = 10_000
// The grid: GRID x GRID cells of equal width over the scores' range, the last closed at the top.
export const GRID = 10
// Histogram buckets of all fields together, and the grid's cells: the groups one aggregate counts.
export const MAX_CELLS = 1000
const SCORE_RANGE = { from: -100, to: 100 } as const

const core = (name: string): Field => ({ source: 'core', name, type: 'number' })
export const MATRIX = {
  x: core('engagementscore'),
  y: core('fitscore'),
  risk: core('churn_risk'),
  probability: core('churn_probability'),
}

export type AggregateInput = MatchInput & {
  // Number fields by name, answered in this order.
  fields: readonly string[]
  matrix?: 'grid' | 'points'
}

// The fields by name, each a number field of the entity, or every problem at /fields/i.
function numberFields(input: AggregateInput, errors: FieldError[]): Field[] {
  const defs = new Map(input.catalog.map((d) => [d.codename, d]))
  return input.fields.flatMap((name, i) => {
    const field = lookupField(input.entity, name, defs)
    const problem =
      typeof field === 'string'
        ? field
        : field.type === 'number'
          ? undefined
          : `${name} is a ${field.type} field`
    if (problem === undefined) return [field as Field]
    errors.push({
      path: `/fields/${i}`,
      message: `${problem}; only number fields can be aggregated`,
    })
    return []
  })
}

interface Statement {
  fields: Field[]
  // The matching records' FROM and WHERE, and the context that binds this statement's parameters.
  match: { from: string; where: string[]; ctx: Ctx }
  params: string[]
}

// A statement over the matching records, reading `reads` besides what the condition reads.
// Refused (400) with every problem of the input, its fields' and its condition's.
function statement(input: AggregateInput, reads: readonly Field[] = []): Statement {
  const errors: FieldError[] = []
  const fields = numberFields(input, errors)
  const { params, ...match } = compileMatch(input, [...fields, ...reads], errors)
  return { fields, match, params }
}

// A field's value `v` as the statistics read it: a stored number no double can hold (left from
// before the one value rule, values.ts) is no value, as the answer's numbers are doubles and the
// average's cast would raise. The core fields are integer columns. `v` is a column of the matches'
// subquery, kept from being flattened (offset 0) so that each value is read from its jsonb once.
const usable = (field: Field, v: string) =>
  field.source === 'core' ? v : `(${sqlDoubleOrNull(v)})`

const whereSql = (match: Statement['match'], also: string[] = []) =>
  [...match.where, ...also].join('\n  and ')

// A score's cell, 0 to GRID - 1; null without a score (which least and greatest would ignore).
const cellSql = (score: string) => {
  const width = (SCORE_RANGE.to - SCORE_RANGE.from) / GRID
  const cell = `least(greatest((${score} + ${-SCORE_RANGE.from}) / ${width}, 0), ${GRID - 1})`
  return `case when ${score} is not null then ${cell} end`
}

// One statement, one scan: the count (column `count`), per field i its number of values (`n<i>`),
// average, minimum and maximum (`avg<i>`, and `min<i>`/`max<i>` as exact numeric text, which the
// histogram binds). With a grid, grouped by cell as well (columns x, y, and `total`, true on the
// row of all matches, and each cell's mean churn probability, `churn_probability`); with points,
// the number of points there are (`scored`).
export function compileSummary(input: AggregateInput): CompiledSearch {
  const grid = input.matrix === 'grid'
  const matrix =
    input.matrix === undefined ? [] : [MATRIX.x, MATRIX.y, ...(grid ? [MATRIX.probability] : [])]
  const { fields, match, params } = statement(input, matrix)
  const values = fields.map((f, i) => `${fieldSql(f, match.ctx)} as v${i}`)
  const stats = fields.map((f, i) => {
    const v = usable(f, `m.v${i}`)
    return [
      `count(${v}) as n${i}`,
      `avg(${v})::float8 as avg${i}`,
      `min(${v})::text as min${i}`,
      `max(${v})::text as max${i}`,
    ].join(', ')
  })
  const [x, y] = [fieldSql(MATRIX.x, match.ctx), fieldSql(MATRIX.y, match.ctx)]
  const probability = fieldSql(MATRIX.probability, match.ctx)
  const cells = grid ? [`${cellSql(x)} as x`, `${cellSql(y)} as y`, `${probability} as p`] : []
  const columns = [
    'count(*)::bigint as count',
    ...stats,
    ...(grid
      ? ['m.x', 'm.y', 'grouping(m.x, m.y) = 3 as total', 'avg(m.p)::float8 as churn_probability']
      : []),
    ...(input.matrix === 'points' ? [`count(*) filter (where m.scored)::bigint as scored`] : []),
  ]
  const inner = [
    ...values,
    ...cells,
    ...(input.matrix === 'points' ? [`(${x} is not null and ${y} is not null) as scored`] : []),
  ]
  const text = [
    `select ${columns.join(', ')}`,
    `from (select ${inner.length > 0 ? inner.join(', ') : '1'} from ${match.from}`,
    `where ${whereSql(match)} offset 0) m`,
    ...(grid ? ['group by grouping sets ((), (m.x, m.y))'] : []),
  ].join('\n')
  return { text, params }
}

// The exact bounds of a field's values, as Postgres printed them (compileSummary's min/max).
export interface Range {
  min: string
  max: string
}

// A range without width, answered as one bucket. Compared as numbers: equal numerics may print
// differently (2.0 and 2.00 in a jsonb bag), which of them min and max keep is Postgres' choice,
// and width_bucket refuses equal bounds.
export const isPoint = (r: Range) => Number(r.min) === Number(r.max)

// Each field's histogram over its own range: columns i (the field's place), bucket (1 to
// `buckets`, the last closed at the top) and count. Fields without a range (no values, or one
// value throughout) are left out.
export function compileHistogram(
  input: AggregateInput,
  ranges: readonly (Range | undefined)[],
  buckets: number,
): CompiledSearch {
  const { fields, match, params } = statement(input)
  const n = match.ctx.bind(String(buckets), 'integer')
  const values = fields.map((f, i) => `${fieldSql(f, match.ctx)}::numeric as v${i}`)
  const rows = ranges.flatMap((r, i) => {
    if (!r || isPoint(r)) return []
    const [lo, hi] = [match.ctx.bind(r.min, 'numeric'), match.ctx.bind(r.max, 'numeric')]
    return [`(${i}, width_bucket(${usable(fields[i], `m.v${i}`)}, ${lo}, ${hi}, ${n}))`]
  })
  const text = [
    // The maximum falls in bucket n + 1 of width_bucket, which is closed at the bottom.
    `select b.i, least(b.bucket, ${n}) as bucket, count(*)::bigint as count`,
    `from (select ${values.join(', ')} from ${match.from}`,
    `where ${whereSql(match)} offset 0) m,`,
    `lateral (values ${rows.join(', ')}) b(i, bucket)`,
    'where b.bucket is not null',
    'group by 1, 2',
  ].join('\n')
  return { text, params }
}

// Up to `limit` scored matches as points (id, name, engagementscore, fitscore, churn_risk,
// churn_probability), the same ones for the same data: those first in the byte order of the MD5 of
// their external id.
export function compilePoints(input: AggregateInput, limit: number): CompiledSearch {
  const read = [MATRIX.x, MATRIX.y, MATRIX.risk, MATRIX.probability]
  const { match, params } = statement(input, read)
  const [x, y, risk, probability] = read.map((f) => fieldSql(f, match.ctx))
  const text = [
    `select r.external_id as id, r.name, ${x} as engagementscore, ${y} as fitscore, ${risk} as churn_risk,`,
    `  ${probability} as churn_probability`,
    `from ${match.from}`,
    `where ${whereSql(match, [`${x} is not null`, `${y} is not null`])}`,
    `order by md5(r.external_id) collate "C", r.external_id`,
    `limit ${match.ctx.bind(String(limit), 'integer')}`,
  ].join('\n')
  return { text, params }
}
