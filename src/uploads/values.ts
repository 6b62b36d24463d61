import type { Catalog, PropertyKind, PropertyType } from '../catalog.ts'
import { DATE_RULE, isDate } from '../dates.ts'
import type { FieldError } from '../errors.ts'

export const fitsType = (value: unknown, type: PropertyType) =>
  value === null ||
  (type === 'number'
    ? typeof value === 'number' && Number.isFinite(value)
    : type === 'date'
      ? isDate(value)
      : typeof value === type)

type Values = Record<string, unknown>
export interface Checked<T> {
  items: T[]
  droppedKeys: number
  errors: FieldError[]
}

// Keeps the keys that match a definition of the right kind (typed: a mismatch is an error),
// drops and counts the rest. Snapshot dates must be unique within a record's metrics.
export const checkValues = <T extends { attributes?: Values; metrics?: ({ date: string } & Values)[] }>(
  items: T[],
  catalog: Catalog,
  itemPath: (index: number) => string,
): Checked<T> => {
  const errors: FieldError[] = []
  let droppedKeys = 0
  const keep = (values: Values, kind: PropertyKind, path: string, skip?: string) => {
    const out: Values = {}
    for (const [key, value] of Object.entries(values)) {
      if (key === skip) continue
      const def = catalog.get(key)
      if (!def || def.kind !== kind) {
        droppedKeys++
        continue
      }
      if (!fitsType(value, def.type))
        errors.push({
          path: `${path}/${key}`,
          message: `Must be ${def.type === 'date' ? DATE_RULE : `a ${def.type}`} or null.`,
        })
      else out[key] = value
    }
    return out
  }
  const checked = items.map((item, i) => {
    const path = itemPath(i)
    const out = { ...item }
    if (item.attributes) out.attributes = keep(item.attributes, 'attribute', `${path}/attributes`)
    if (item.metrics) {
      const seen = new Set<string>()
      out.metrics = item.metrics.map((m, j) => {
        if (seen.has(m.date))
          errors.push({ path: `${path}/metrics/${j}/date`, message: `The date ${m.date} appears twice in metrics.` })
        seen.add(m.date)
        return { date: m.date, ...keep(m, 'metric', `${path}/metrics/${j}`, 'date') }
      })
    }
    return out
  })
  return { items: checked, droppedKeys, errors }
}
