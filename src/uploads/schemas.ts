import * as v from 'valibot'
import { DateString, id255, isObject, storable, text255 } from '../validate.ts'

export const MAX_CUSTOMERS = 1000
export const MAX_CONTACTS = 100
export const MAX_METRICS = 200

const Value = v.union(
  [v.pipe(v.string(), storable), v.number(), v.boolean(), v.null()],
  'Must be a string, number, boolean, date or null.',
)

export const Attributes = v.pipe(
  v.custom<Record<string, unknown>>(isObject, 'Must be an object.'),
  v.record(v.string(), Value),
)
const Metric = v.objectWithRest({ date: DateString }, Value)
const Metrics = v.pipe(v.array(Metric), v.maxLength(MAX_METRICS, `At most ${MAX_METRICS} metric objects.`))

export const CustomerItem = v.object({
  external_id: id255,
  name: text255,
  owner_email: v.optional(v.nullable(text255)),
  attributes: v.optional(Attributes),
  metrics: v.optional(Metrics),
})

export const ContactItem = v.object({
  customer_external_id: id255,
  contact_external_id: id255,
  contact_name: text255,
  attributes: v.optional(Attributes),
  metrics: v.optional(Metrics),
})

export const CustomersBody = v.object({
  customers: v.pipe(
    v.array(CustomerItem),
    v.minLength(1, 'At least one customer.'),
    v.maxLength(MAX_CUSTOMERS, `At most ${MAX_CUSTOMERS} customers per request.`),
  ),
})

export const ContactsBody = v.object({
  contacts: v.pipe(
    v.array(ContactItem),
    v.minLength(1, 'At least one contact.'),
    v.maxLength(MAX_CONTACTS, `At most ${MAX_CONTACTS} contacts per request.`),
  ),
})

export type CustomerItem = v.InferOutput<typeof CustomerItem>
export type ContactItem = v.InferOutput<typeof ContactItem>
