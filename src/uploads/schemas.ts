import * as v from 'valibot'
import { isDate } from '../dates.ts'
import {
  DateString,
  describe,
  everyValue,
  id255,
  int,
  isObject,
  quick,
  strict,
  text255,
  Timestamp,
} from '../validate.ts'
import { DroppedKeyNames, isValue, Value } from '../values.ts'
import { UPLOAD_STATES } from './lifecycle.ts'

export const MAX_CUSTOMERS = 1000
const MAX_CONTACTS = 100
const MAX_METRICS = 200

// Both take plain values at once (validate.ts quick): most bodies are valid.
export const Attributes = quick(
  v.pipe(
    v.custom<Record<string, unknown>>(isObject, 'Must be an object.'),
    v.record(v.string(), Value),
  ),
  (x) => isObject(x) && everyValue(x, isValue),
)
const Metric = v.objectWithRest({ date: DateString }, Value)
const isPlainMetric = (m: unknown) =>
  isObject(m) &&
  Object.hasOwn(m, 'date') &&
  typeof m.date === 'string' &&
  isDate(m.date) &&
  everyValue(m, isValue, 'date')
// One snapshot per date: checkValues (values.ts) refuses a date given twice, at its path. JSON
// Schema has no "unique by one key", so the document says it with the extension x-unique-key (and
// with uniqueItems, which it implies).
const Metrics = quick(
  v.pipe(
    v.array(Metric),
    v.maxLength(MAX_METRICS, `At most ${MAX_METRICS} metric objects.`),
    v.metadata({ uniqueItems: true, 'x-unique-key': 'date' }),
    v.description('One object per date: a date given twice is refused.'),
  ),
  (x) => Array.isArray(x) && x.length <= MAX_METRICS && x.every(isPlainMetric),
)

export const CustomerItem = strict({
  external_id: id255,
  name: text255,
  owner_email: v.optional(v.nullable(text255)),
  attributes: v.optional(Attributes),
  metrics: v.optional(Metrics),
})

const contactFields = {
  contact_external_id: id255,
  contact_name: text255,
  attributes: v.optional(Attributes),
  metrics: v.optional(Metrics),
}
export const ContactItem = strict({ customer_external_id: id255, ...contactFields })
// A contact created under its customer's path (POST /api/v1/customer/{id}/contact).
export const ContactOfCustomer = strict(contactFields)

export const CustomersBody = strict({
  customers: v.pipe(
    v.array(CustomerItem),
    v.minLength(1, 'At least one customer.'),
    v.maxLength(MAX_CUSTOMERS, `At most ${MAX_CUSTOMERS} customers per request.`),
  ),
})

export const ContactsBody = strict({
  contacts: v.pipe(
    v.array(ContactItem),
    v.minLength(1, 'At least one contact.'),
    v.maxLength(MAX_CONTACTS, `At most ${MAX_CONTACTS} contacts per request.`),
  ),
})

export type CustomerItem = v.InferOutput<typeof CustomerItem>
export type ContactItem = v.InferOutput<typeof ContactItem>
export type UploadItem = CustomerItem | ContactItem

// The answers, as OpenAPI publishes them (api/schemas.ts names them).
export const UploadAccepted = v.object({
  upload_id: int,
  status: v.literal('received'),
  items: describe(int, 'How many items the upload holds.'),
})

const UploadState = v.picklist(UPLOAD_STATES)
export const Upload = v.object({
  upload_id: int,
  kind: v.picklist(['customers', 'contacts']),
  status: UploadState,
  items: int,
  created: v.nullable(int),
  updated: v.nullable(int),
  ignored: v.nullable(int),
  dropped_keys: describe(
    v.nullable(int),
    'Attribute and metric keys dropped because no property defines them.',
  ),
  dropped_key_names: DroppedKeyNames,
  warnings: v.nullable(v.array(v.object({ external_id: v.string(), message: v.string() }))),
  error: describe(
    v.nullable(v.string()),
    'Why processing failed: where (item and field, when known), then what.',
  ),
  received_at: Timestamp,
  processed_at: v.nullable(Timestamp),
  scored_at: v.nullable(Timestamp),
})

export const UploadSummary = v.object({
  ...Upload.entries,
  stuck: describe(v.boolean(), 'Not processed within SERVICE_STUCK_UPLOAD_SECONDS of its arrival.'),
})

export const UploadAction = v.object({ upload_id: int, status: UploadState })

export const UploadQuery = {
  status: { description: 'Only uploads in this state.', schema: UploadState },
  stuck: {
    description: 'true: only stuck uploads; false (the default): every upload.',
    schema: v.optional(
      v.pipe(
        v.picklist(['true', 'false']),
        v.transform((s) => s === 'true'),
      ),
      'false',
    ),
  },
}
