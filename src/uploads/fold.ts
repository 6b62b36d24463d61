// An upload's items folded into one record each, in the request, before they are stored: the merge
// (merge.ts) then reads its records and snapshots as stored, with no aggregation in SQL (folding
// them there was a third of the merge: docs/benchmarks.md). Later items win: the last name, owner
// email and customer of an external id, its attributes merged in item order (later keys winning, a
// null kept so that it clears the stored value), and one snapshot per date merged the same way.
import type { Collection } from '../db/tables.ts'
import type { ContactItem, CustomerItem, UploadItem } from './schemas.ts'

type Values = NonNullable<CustomerItem['attributes']>

// One record of an upload as stored in uploads.items; its keys are stage_records' columns.
type FoldedRecord = {
  external_id: string
  name: string | null
  owner_email?: string
  customer_external_id?: string
  // Absent when no item had attributes, so that an update leaves them as they are.
  attributes?: Values
  // What a new record is inserted with: each metric's latest value, nulls dropped, as the merge's
  // refresh folds a stored record's snapshots (merge.ts refreshLatestMetrics).
  metrics: Values
  // Date -> the values of that day's snapshot.
  snapshots: Record<string, Values>
  // The first item of this external id (records are created in that order) and the last (the
  // item that won, which a failed upload's error names).
  first_ord: number
  item: number
}

// An own key __proto__ (a codename may be one) is defined, not assigned, so that it stays a key
// rather than setting a prototype.
const put = (into: Values, key: string, value: Values[string]) => {
  if (key === '__proto__')
    Object.defineProperty(into, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    })
  else into[key] = value
}

// Later keys win; an item's own objects are kept as they are until a second item merges in.
const merged = (into: Values | undefined, from: Values) => {
  if (!into) return from
  const out = { ...into }
  for (const key of Object.keys(from)) put(out, key, from[key])
  return out
}

const foldSnapshots = (record: FoldedRecord, metrics: UploadItem['metrics']) => {
  for (const { date, ...values } of metrics ?? [])
    record.snapshots[date] = merged(record.snapshots[date], values)
}

// Each metric's value on the latest date that holds it.
const latest = (snapshots: Record<string, Values>) => {
  const metrics: Values = {}
  for (const date of Object.keys(snapshots).sort()) {
    const values = snapshots[date]
    for (const key of Object.keys(values)) if (values[key] !== null) put(metrics, key, values[key])
  }
  return metrics
}

const FIELDS = {
  customers: (r: FoldedRecord, item: CustomerItem) => {
    r.name = item.name ?? null
    if (item.owner_email != null) r.owner_email = item.owner_email
  },
  contacts: (r: FoldedRecord, item: ContactItem) => {
    r.name = item.contact_name ?? null
    r.customer_external_id = item.customer_external_id
  },
} as const

export const foldItems = (collection: Collection, items: UploadItem[]): FoldedRecord[] => {
  const records = new Map<string, FoldedRecord>()
  const setFields = FIELDS[collection] as (r: FoldedRecord, item: UploadItem) => void
  items.forEach((item, i) => {
    const id = 'contact_external_id' in item ? item.contact_external_id : item.external_id
    let record = records.get(id)
    if (!record) {
      record = { external_id: id, name: null, metrics: {}, snapshots: {}, first_ord: i, item: i }
      records.set(id, record)
    }
    record.item = i
    setFields(record, item)
    if (item.attributes) record.attributes = merged(record.attributes, item.attributes)
    foldSnapshots(record, item.metrics)
  })
  for (const record of records.values()) record.metrics = latest(record.snapshots)
  return [...records.values()]
}
