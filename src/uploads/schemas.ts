import * as v from 'valibot'
import { DateString, id255, isObject, strict, text255 } from '../validate.ts'
import { Value } from '../values.ts'

export const MAX_CUSTOMERS = 1000
export const MAX_CONTACTS = 100
export const MAX_METRICS = 200

export const Attributes = v.pipe(
  v.custom<Record<string, unknown>>(isObject, 'Must be an object.'),
  v.record(v.string(), Value),
)
const Metric = v.objectWithRest({ date: DateString }, Value)
const Metrics = v.pipe(v.array(Metric), v.maxLength(MAX_METRICS, `At most ${MAX_METRICS} metric objects.`))

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
