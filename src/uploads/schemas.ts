import * as v from 'valibot'

export const MAX_CUSTOMERS = 1000
export const MAX_CONTACTS = 100
export const MAX_METRICS = 200

const text255 = v.pipe(v.string(), v.maxLength(255, 'At most 255 characters.'))
const id255 = v.pipe(v.string(), v.minLength(1, 'Must not be empty.'), v.maxLength(255, 'At most 255 characters.'))
const Value = v.union([v.string(), v.number(), v.boolean(), v.null()], 'Must be a string, number, boolean, date or null.')
export const DateString = v.pipe(
  v.string(),
  v.regex(/^\d{4}-\d{2}-\d{2}$/, 'Must be a date YYYY-MM-DD.'),
  v.check((s) => !Number.isNaN(Date.parse(s + 'T00:00:00Z')) && new Date(s + 'T00:00:00Z').toISOString().startsWith(s), 'Must be a real calendar date.'),
)

const Attributes = v.record(v.string(), Value)
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
  customers: v.pipe(v.array(CustomerItem), v.minLength(1, 'At least one customer.'), v.maxLength(MAX_CUSTOMERS, `At most ${MAX_CUSTOMERS} customers per request.`)),
})

export const ContactsBody = v.object({
  contacts: v.pipe(v.array(ContactItem), v.minLength(1, 'At least one contact.'), v.maxLength(MAX_CONTACTS, `At most ${MAX_CONTACTS} contacts per request.`)),
})

export type CustomerItem = v.InferOutput<typeof CustomerItem>
export type ContactItem = v.InferOutput<typeof ContactItem>
