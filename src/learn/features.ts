// Customers as numbers (docs/scoring.md, "Learned churn probability"): each property becomes one or
// more columns of a matrix, learned from the training customers once and kept with the model, so
// that a customer scored later is encoded the same way. A missing value is NaN, never a guess: the
// models decide what it means (trees send it down a side, the linear model imputes and flags it).
import type { PropertyDef } from '../property.ts'
import { addDays, dayNumber, isDate } from '../dates.ts'

export interface Snapshot {
  date: string
  values: Record<string, unknown>
}

// A customer as the learner sees it: its current attributes, its dated metric snapshots (in any
// order) and its churn state.
export interface Sample {
  attributes: Record<string, unknown>
  snapshots: readonly Snapshot[]
  churned: boolean
  churnedDate: string | null
}

// One column of the matrix: which property it reads and how.
export type Column =
  | { codename: string; part: 'value' | 'latest' | 'change' }
  | { codename: string; part: 'category'; category: string }
  | { codename: string; part: 'other' | 'missing' }

export interface Encoder {
  columns: Column[]
  defs: PropertyDef[]
  // The days before the reference date a churned customer's snapshots stop (SPEC 13).
  leadDays: number
}

// A string property's categories that get a column of their own: the most frequent, each seen at
// least MIN_CATEGORY times. Rarer values and values first seen at scoring share the "other" column.
const MAX_CATEGORIES = 12
const MIN_CATEGORY = 5
// The change of a metric is measured over this many days before its latest snapshot.
const CHANGE_DAYS = 30

// The date a customer's features are taken at: today, or for a churned customer leadDays before its
// churn, so that what happened in the run-up to the churn (and the churn itself) cannot give the
// label away.
const referenceDate = (s: Sample, today: string, leadDays: number) =>
  s.churned && s.churnedDate && s.churnedDate <= today ? addDays(s.churnedDate, -leadDays) : today

const usable = (s: Sample, reference: string) =>
  s.snapshots
    .filter((x) => x.date <= reference)
    .sort((a, b) => (a.date < b.date ? -1 : a.date > b.date ? 1 : 0))

// A value of a type as a number, NaN when it has none: booleans 1/0, dates as days before the
// scoring date (negative in the future). Dates count from the scoring date for churned customers
// too: an attribute is today's value, and counting a churned customer's dates from an earlier day
// would tell the classes apart by that shift alone.
const numeric = (type: PropertyDef['type'], v: unknown, today: string): number => {
  if (v === null || v === undefined) return Number.NaN
  if (type === 'number') return typeof v === 'number' && Number.isFinite(v) ? v : Number.NaN
  if (type === 'boolean') return v === true ? 1 : v === false ? 0 : Number.NaN
  if (type === 'date') return isDate(v) ? dayNumber(today) - dayNumber(v) : Number.NaN
  return Number.NaN
}
const category = (v: unknown) => (v === null || v === undefined || v === '' ? undefined : String(v))

// What a sample holds of one property, at its reference date: the attribute, or the metric's
// latest value and the value CHANGE_DAYS before that (the oldest usable snapshot when none is
// that old, none when there is only one).
interface Reading {
  latest: unknown
  before: unknown
}
const read = (def: PropertyDef, s: Sample, snapshots: readonly Snapshot[]): Reading => {
  if (def.kind === 'attribute') return { latest: s.attributes[def.codename], before: undefined }
  const dated = snapshots.filter(
    (x) => x.values[def.codename] !== undefined && x.values[def.codename] !== null,
  )
  if (dated.length === 0) return { latest: undefined, before: undefined }
  const last = dated[dated.length - 1]
  const since = addDays(last.date, -CHANGE_DAYS)
  const earlier = dated.slice(0, -1)
  const before = earlier.filter((x) => x.date <= since).at(-1) ?? earlier[0]
  return { latest: last.values[def.codename], before: before?.values[def.codename] }
}

// The matrix of customers read page by page (a training's read): each page's samples are reduced
// to numbers as they come (a string to the index of its value) and can be dropped, so that a
// training holds its customers as typed arrays only. `finish` learns the columns (the encoder) and
// fills the matrix, as `encode` with that encoder would.
export const matrixReader = (defs: PropertyDef[], today: string, leadDays: number) => {
  // Per property, one value per sample: the number (NaN: none) or the string's index in `values`
  // (-1: none); a number metric also its change.
  const latest = defs.map(() => [] as number[])
  const change = defs.map(() => [] as number[])
  const values = defs.map(() => new Map<string, number>())
  const labels: number[] = []
  const add = (samples: readonly Sample[]) => {
    for (const s of samples) {
      const snapshots = usable(s, referenceDate(s, today, leadDays))
      defs.forEach((def, d) => {
        const r = read(def, s, snapshots)
        if (def.type === 'string') {
          const c = category(r.latest)
          if (c === undefined) return latest[d].push(-1)
          const seen = values[d].get(c)
          latest[d].push(seen ?? values[d].size)
          if (seen === undefined) values[d].set(c, values[d].size)
        } else {
          const v = numeric(def.type, r.latest, today)
          latest[d].push(v)
          if (def.kind === 'metric' && def.type === 'number')
            change[d].push(v - numeric(def.type, r.before, today))
        }
      })
      labels.push(s.churned ? 1 : 0)
    }
  }
  const finish = () => {
    const n = labels.length
    const columns: Column[] = []
    const X: Float64Array[] = []
    defs.forEach((def, d) => {
      const { codename } = def
      if (def.type === 'string') {
        const counts = new Float64Array(values[d].size)
        for (const c of latest[d]) if (c >= 0) counts[c]++
        const ranked = [...values[d]]
          .filter(([, c]) => counts[c] >= MIN_CATEGORY)
          .sort((a, b) => counts[b[1]] - counts[a[1]] || (a[0] < b[0] ? -1 : 1))
          .slice(0, MAX_CATEGORIES)
        // Each value's column among the categories; -1 for "other".
        const own = new Int32Array(values[d].size).fill(-1)
        ranked.forEach(([category, c], k) => {
          own[c] = k
          columns.push({ codename, part: 'category', category })
        })
        columns.push({ codename, part: 'other' }, { codename, part: 'missing' })
        const cols = Array.from({ length: ranked.length + 2 }, () => new Float64Array(n))
        latest[d].forEach((c, i) => {
          const at = c < 0 ? ranked.length + 1 : own[c] < 0 ? ranked.length : own[c]
          cols[at][i] = 1
        })
        X.push(...cols)
      } else if (def.kind === 'metric' && def.type === 'number') {
        columns.push({ codename, part: 'latest' }, { codename, part: 'change' })
        X.push(Float64Array.from(latest[d]), Float64Array.from(change[d]))
      } else {
        columns.push({ codename, part: def.kind === 'metric' ? 'latest' : 'value' })
        X.push(Float64Array.from(latest[d]))
      }
      latest[d] = []
      change[d] = []
    })
    const encoder: Encoder = { columns, defs, leadDays }
    return { encoder, X, y: Float64Array.from(labels), n }
  }
  return { add, finish }
}

// The columns of the given properties, learned from the training samples.
export const fitEncoder = (
  defs: PropertyDef[],
  samples: readonly Sample[],
  today: string,
  leadDays: number,
) => {
  const reader = matrixReader(defs, today, leadDays)
  reader.add(samples)
  return reader.finish().encoder
}

// A matrix, column by column: X[j][i] is column j of sample i.
export type Matrix = Float64Array[]

// The samples' rows, each of encoder.columns.
export const encode = (encoder: Encoder, samples: readonly Sample[], today: string): Matrix => {
  const X = encoder.columns.map(() => new Float64Array(samples.length))
  const byCodename = new Map(encoder.defs.map((d) => [d.codename, d]))
  samples.forEach((s, i) => {
    const reference = referenceDate(s, today, encoder.leadDays)
    const snapshots = usable(s, reference)
    const readings = new Map<string, Reading>()
    const reading = (codename: string) => {
      let r = readings.get(codename)
      if (!r) readings.set(codename, (r = read(byCodename.get(codename)!, s, snapshots)))
      return r
    }
    encoder.columns.forEach((col, j) => {
      const def = byCodename.get(col.codename)!
      const r = reading(col.codename)
      X[j][i] = columnValue(encoder, col, def, r, today)
    })
  })
  return X
}

const columnValue = (
  encoder: Encoder,
  col: Column,
  def: PropertyDef,
  r: Reading,
  today: string,
) => {
  if (col.part === 'value' || col.part === 'latest') return numeric(def.type, r.latest, today)
  if (col.part === 'change')
    return numeric(def.type, r.latest, today) - numeric(def.type, r.before, today)
  const c = category(r.latest)
  if (col.part === 'missing') return c === undefined ? 1 : 0
  if (col.part === 'category') return c === col.category ? 1 : 0
  // other: a value without a column of its own (rare at training, or never seen there).
  const known = encoder.columns.some(
    (k) => k.codename === col.codename && k.part === 'category' && k.category === c,
  )
  return c !== undefined && !known ? 1 : 0
}

// The value a driver shows for a property: the attribute, or the metric's latest usable value.
export const shownValue = (
  encoder: Encoder,
  s: Sample,
  codename: string,
  today: string,
): unknown => {
  const def = encoder.defs.find((d) => d.codename === codename)
  if (!def) return null
  const r = read(def, s, usable(s, referenceDate(s, today, encoder.leadDays)))
  return r.latest ?? null
}
