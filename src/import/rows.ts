import * as v from 'valibot'
import { ContactItem, CustomerItem } from '../uploads/schemas.ts'
import { checkValues, type Dropped } from '../values.ts'
import { issuesToErrors, keyOfToken } from '../validate.ts'
import type { FieldError } from '../errors.ts'
import type { Catalog, PropertyType } from '../property.ts'
import type { Collection } from '../db/tables.ts'

// A CSV file of one collection of records: its fixed columns, then property codenames.
const FIELDS: Record<Collection, { required: string[]; optional: string[] }> = {
  customers: { required: ['external_id', 'name'], optional: ['owner_email'] },
  contacts: {
    required: ['customer_external_id', 'contact_external_id', 'contact_name'],
    optional: [],
  },
}

// 'unknown' columns name no property: their cells go into the item's attributes, where the typed
// check drops and counts them as it does the API's unknown keys.
type Role = 'field' | 'optional' | 'date' | 'attribute' | 'metric' | 'unknown'
interface Column {
  index: number
  name: string
  role: Role
  type: PropertyType
}
export interface Layout {
  collection: Collection
  columns: Column[]
  ignored: string[]
  catalog: Catalog
  width: number
}

// Reads the header row against the account's property definitions; throws when the file cannot
// be imported at all.
export const readHeader = (collection: Collection, header: string[], catalog: Catalog): Layout => {
  const { required, optional } = FIELDS[collection]
  const seen = new Set<string>()
  for (const name of header) {
    if (seen.has(name)) throw new Error(`The header names the column '${name}' twice.`)
    seen.add(name)
  }
  const missing = required.filter((name) => !seen.has(name))
  if (missing.length)
    throw new Error(
      `The header lacks the column${missing.length > 1 ? 's' : ''} ${missing.join(', ')}.`,
    )
  const columns = header.map((name, index): Column => {
    const def = catalog.get(name)
    const role = required.includes(name)
      ? 'field'
      : optional.includes(name)
        ? 'optional'
        : name === 'date'
          ? 'date'
          : (def?.kind ?? 'unknown')
    return { index, name, role, type: def?.type ?? 'string' }
  })
  if (columns.some((c) => c.role === 'metric') && !seen.has('date')) {
    throw new Error('Metric columns need a date column: each row is one snapshot on that date.')
  }
  return {
    collection,
    columns,
    ignored: columns.filter((c) => c.role === 'unknown').map((c) => c.name),
    catalog,
    width: header.length,
  }
}

const NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/

// A cell in the property's type. Text that does not read as that type is passed on unchanged, so
// the upload's own typed check reports it exactly as it would for the API.
const typed = (cell: string, type: PropertyType): unknown =>
  type === 'number'
    ? NUMBER.test(cell)
      ? Number(cell)
      : cell
    : type === 'boolean'
      ? /^true$/i.test(cell)
        ? true
        : /^false$/i.test(cell)
          ? false
          : cell
      : cell

// One row as an upload item. Identifiers and names are taken as written; an empty cell of any
// other column is absent (it leaves the stored value unchanged).
const rowToItem = (layout: Layout, cells: string[]): Record<string, unknown> => {
  const item: Record<string, unknown> = {}
  let attributes: Record<string, unknown> | undefined
  let metrics: Record<string, unknown> | undefined
  for (const { index, name, role, type } of layout.columns) {
    const cell = cells[index] ?? ''
    if (role === 'field') item[name] = cell
    else if (cell === '') continue
    else if (role === 'optional') item[name] = cell
    else if (role === 'attribute' || role === 'unknown')
      (attributes ??= {})[name] = typed(cell, type)
    else (metrics ??= {})[name] = role === 'date' ? cell : typed(cell, type)
  }
  if (attributes) item.attributes = attributes
  if (metrics) item.metrics = [metrics]
  return item
}

const schemas = { customers: CustomerItem, contacts: ContactItem }

type Checked =
  | { ok: true; item: CustomerItem | ContactItem; dropped: Dropped }
  | { ok: false; errors: FieldError[] }

// The API's checks, item by item: the same valibot item schema, then the same typed check
// against the account's definitions.
export const checkRow = (layout: Layout, cells: string[]): Checked => {
  if (cells.length !== layout.width) {
    return {
      ok: false,
      errors: [
        {
          path: '',
          message: `The row has ${cells.length} fields; the header has ${layout.width}.`,
        },
      ],
    }
  }
  const raw = rowToItem(layout, cells)
  const metrics = raw.metrics as Record<string, unknown>[] | undefined
  if (metrics && metrics[0].date === undefined) {
    return {
      ok: false,
      errors: [{ path: '/metrics/0/date', message: 'Metric values need a date.' }],
    }
  }
  const parsed = v.safeParse(schemas[layout.collection], raw, { abortEarly: false })
  if (!parsed.success) return { ok: false, errors: issuesToErrors(parsed.issues) }
  const checked = checkValues([parsed.output], layout.catalog, () => '')
  return checked.errors.length
    ? { ok: false, errors: checked.errors }
    : { ok: true, item: checked.items[0], dropped: checked.dropped }
}

// Error paths point into the item (/attributes/plan, /metrics/0/date); in a CSV the column
// they end in is what the reader can find.
export const describeError = (line: number, e: FieldError) => {
  const last = keyOfToken(e.path.split('/').pop()!)
  return `line ${line}${last ? `, column ${last}` : ''}: ${e.message}`
}
