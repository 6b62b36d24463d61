// The one value rule: what a property value may be, on every path that writes one (uploads,
// single-record writes, tracking data and whatever ingest comes next). A number is a finite double
// (JSON.parse reads 1e400 as Infinity, which JSON.stringify would write as null and PostgreSQL's
// jsonb would keep as a 401-digit numeric no double can hold), text is storable (validate.ts) and
// at most MAX_TEXT_VALUE characters, a date follows the one date rule (dates.ts). The caller stores
// the value it checked, serialized again, never the bytes it came as.
import * as v from 'valibot'
import type { Catalog, PropertyKind, PropertyType } from './property.ts'
import { DATE_RULE, isDate } from './dates.ts'
import type { FieldError } from './errors.ts'
import {
  closest,
  cut,
  describe,
  int,
  isObject,
  pointerToken,
  storableText,
  UNSTORABLE,
  UNSTORABLE_MESSAGE,
} from './validate.ts'

// A text value of an attribute or metric holds at most this many characters (Unicode code points,
// so an emoji counts as one), so that one record cannot carry megabytes through processing,
// scoring and every search page.
const MAX_TEXT_VALUE = 65_536
const TEXT_CAP_MESSAGE = `At most ${MAX_TEXT_VALUE} characters.`
const FINITE_MESSAGE = 'Must be a finite number a double can hold (at most about 1.8e308 in size).'

// A string has at least as many UTF-16 units as code points, so only a long one is counted.
const fitsTextCap = (s: string) => {
  if (s.length <= MAX_TEXT_VALUE) return true
  let n = 0
  for (const _ of s) if (++n > MAX_TEXT_VALUE) return false
  return true
}

// Numbers first: most values are metrics, and a union tries its options in order (half the time
// of checking a body of 1000 customers x 12 snapshots). The options' types are disjoint, so the
// order changes no answer.
export const Value = v.union(
  [
    v.pipe(
      v.number(),
      v.check((n: number) => Number.isFinite(n), FINITE_MESSAGE),
    ),
    v.pipe(
      v.string(),
      v.check(fitsTextCap, TEXT_CAP_MESSAGE),
      v.check((s: string) => !UNSTORABLE.test(s), UNSTORABLE_MESSAGE),
    ),
    v.boolean(),
    v.null(),
  ],
  'Must be a string, number, boolean, date or null.',
)

// What Value takes, in one test (without its messages): the quick path of the upload schemas.
export const isValue = (x: unknown) =>
  typeof x === 'number'
    ? Number.isFinite(x)
    : typeof x === 'string'
      ? fitsTextCap(x) && !UNSTORABLE.test(x)
      : x === null || typeof x === 'boolean'

export const fitsType = (value: unknown, type: PropertyType) =>
  value === null ||
  (type === 'number'
    ? typeof value === 'number' && Number.isFinite(value)
    : type === 'date'
      ? isDate(value)
      : typeof value === type)

type Values = Record<string, unknown>

// Keys dropped because no property of their kind defines them, named so that a typo (contry) can be
// found: each with how often it was dropped and the codename it most likely meant. Uploads and
// ingest statuses show them. At most NAMED_DROPS distinct keys are named (each cut to 200
// characters, in its storable form: storableText); the count covers them all.
const NAMED_DROPS = 100
const DroppedKeyName = v.object({
  key: v.string(),
  count: int,
  did_you_mean: v.nullable(v.string()),
})
type DroppedKeyName = v.InferOutput<typeof DroppedKeyName>
export const DroppedKeyNames = describe(
  v.array(DroppedKeyName),
  `The keys dropped, most often dropped first, each with a codename it may have meant (at most ${NAMED_DROPS}).`,
)
export interface Dropped {
  count: number
  names: Map<string, DroppedKeyName>
}
export const noneDropped = (): Dropped => ({ count: 0, names: new Map() })

// Counts one dropped key; `known` gives the codenames it may have meant (asked once per name).
const dropKey = (dropped: Dropped, key: string, known: () => string[]) => {
  dropped.count++
  const name = cut(storableText(key))
  const seen = dropped.names.get(name)
  if (seen) seen.count++
  else if (dropped.names.size < NAMED_DROPS)
    dropped.names.set(name, { key: name, count: 1, did_you_mean: closest(key, known()) ?? null })
}

export const addDropped = (into: Dropped, from: Dropped) => {
  into.count += from.count
  for (const [name, d] of from.names) {
    const seen = into.names.get(name)
    if (seen) seen.count += d.count
    else if (into.names.size < NAMED_DROPS) into.names.set(name, { ...d })
  }
}

export const droppedKeyNames = (dropped: Dropped): DroppedKeyName[] =>
  [...dropped.names.values()].sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))

export interface Checked<T> {
  items: T[]
  dropped: Dropped
  errors: FieldError[]
}

// Keeps the keys that match a definition of the right kind (typed: a mismatch is an error),
// drops, counts and names the rest. Snapshot dates must be unique within a record's metrics.
export const checkValues = <
  T extends { attributes?: Values; metrics?: ({ date: string } & Values)[] },
>(
  items: T[],
  catalog: Catalog,
  itemPath: (index: number) => string,
): Checked<T> => {
  const errors: FieldError[] = []
  const dropped = noneDropped()
  const codenames: Partial<Record<PropertyKind, string[]>> = {}
  const known = (kind: PropertyKind) => () =>
    (codenames[kind] ??= [...catalog.values()]
      .filter((d) => d.kind === kind)
      .map((d) => d.codename))
  const knownOf = { attribute: known('attribute'), metric: known('metric') }
  // Runs for every value of an upload (12,000 snapshots in a request): paths are built only for an
  // error, and the kept values are written into `out` (a snapshot's starts with its date).
  const keep = (
    values: Values,
    kind: PropertyKind,
    path: () => string,
    out: Values,
    skip?: string,
  ) => {
    for (const key in values) {
      if (key === skip || !Object.hasOwn(values, key)) continue
      const value = values[key]
      const def = catalog.get(key)
      if (!def || def.kind !== kind) {
        dropKey(dropped, key, knownOf[kind])
        continue
      }
      if (!fitsType(value, def.type))
        errors.push({
          path: `${path()}/${key}`,
          message: `Must be ${def.type === 'date' ? DATE_RULE : `a ${def.type}`} or null.`,
        })
      else out[key] = value
    }
    return out
  }
  const checked = items.map((item, i) => {
    const out = { ...item }
    if (item.attributes)
      out.attributes = keep(item.attributes, 'attribute', () => `${itemPath(i)}/attributes`, {})
    if (item.metrics) {
      const seen = new Set<string>()
      out.metrics = item.metrics.map((m, j) => {
        if (seen.has(m.date))
          errors.push({
            path: `${itemPath(i)}/metrics/${j}/date`,
            message: `The date ${m.date} appears twice in metrics.`,
          })
        seen.add(m.date)
        return keep(
          m,
          'metric',
          () => `${itemPath(i)}/metrics/${j}`,
          { date: m.date },
          'date',
        ) as typeof m
      })
    }
    return out
  })
  return { items: checked, dropped, errors }
}

// What a free-form JSON value holds (tracking data, traits): every number finite, every string and
// key storable and within the text cap, at most MAX_DEPTH levels of arrays and objects (JSON.parse
// takes nesting deeper than the call stack, which JSON.stringify and PostgreSQL do not). Iterative,
// with paths built only for a finding. Returns every problem, each at its JSON pointer.
export const MAX_DEPTH = 100
interface Node {
  value: unknown
  key: string
  parent: Node | null
  depth: number
}
const escape = (key: string) => pointerToken(cut(key))
const pointerOf = (node: Node): string => {
  const keys: string[] = []
  for (let n: Node | null = node; n?.parent; n = n.parent) keys.push(n.key)
  return keys
    .reverse()
    .map((k) => '/' + escape(k))
    .join('')
}
const textProblem = (s: string) =>
  UNSTORABLE.test(s) ? UNSTORABLE_MESSAGE : fitsTextCap(s) ? null : TEXT_CAP_MESSAGE

export const freeFormProblems = (root: unknown): FieldError[] => {
  const errors: FieldError[] = []
  const stack: Node[] = [{ value: root, key: '', parent: null, depth: 0 }]
  for (let node = stack.pop(); node; node = stack.pop()) {
    const { value, parent } = node
    const keyProblem = parent && !Array.isArray(parent.value) ? textProblem(node.key) : null
    if (keyProblem) errors.push({ path: pointerOf(node), message: `Its key: ${keyProblem}` })
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) errors.push({ path: pointerOf(node), message: FINITE_MESSAGE })
    } else if (typeof value === 'string') {
      const problem = textProblem(value)
      if (problem) errors.push({ path: pointerOf(node), message: problem })
    } else if ((isObject(value) || Array.isArray(value)) && node.depth === MAX_DEPTH) {
      errors.push({ path: pointerOf(node), message: `Nests deeper than ${MAX_DEPTH} levels.` })
    } else if (isObject(value) || Array.isArray(value)) {
      // Pushed last to first, so that the problems come in the order of the document.
      const entries = Object.entries(value)
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i]
        stack.push({ value: item, key, parent: node, depth: node.depth + 1 })
      }
    }
  }
  return errors
}

// The SQL twin for numbers stored before this rule (or by hand): the numeric expression `n` as
// JSON.parse reads it, so that a cast to float8 never raises. Beyond a double's range it is NULL
// (JavaScript reads Infinity, which counts as no value), below the smallest subnormal 0 (as
// JavaScript rounds it). `n` is written three times: keep it a cheap one.
export const sqlDoubleOrNull = (n: string) =>
  `case when abs(${n}) > 1.7976931348623157e308 then null when abs(${n}) < 4.9406564584124654e-324 then 0 else ${n} end`
