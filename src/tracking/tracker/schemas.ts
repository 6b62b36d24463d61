import * as v from 'valibot'
import { refuse } from '../../errors.ts'
import {
  describe,
  id,
  id255,
  int,
  isObject,
  limitParam,
  nonEmpty,
  size,
  strict,
  Timestamp,
} from '../../validate.ts'
import { freeFormProblems } from '../../values.ts'
import { END_TIME, MAX_EVENT_BYTES, MIN_TIME, overBytes } from '../intake/limits.ts'

const MAX_EVENTS = 100
// Whole milliseconds within the intakes' bounds (intake/limits.ts).
const MAX_TIMESTAMP = END_TIME - 1

const Values = v.pipe(
  v.custom<Record<string, unknown>>(isObject, 'Must be an object.'),
  v.record(v.string(), v.unknown()),
)

const TrackingEvent = strict({
  name: v.pipe(
    v.string(),
    v.minLength(1, 'Must not be empty.'),
    v.maxLength(255, 'At most 255 characters.'),
  ),
  timestamp: v.pipe(
    v.number(),
    v.check(
      (t: number) => Number.isInteger(t) && t >= MIN_TIME && t <= MAX_TIMESTAMP,
      'Must be Unix time in whole milliseconds (not seconds), from 2000-01-01 to 2099-12-31.',
    ),
    v.metadata({ type: 'integer', minimum: MIN_TIME, maximum: MAX_TIMESTAMP }),
  ),
  identification: strict({ customer: id255, contact: v.nullish(id255) }),
  data: v.nullish(
    v.pipe(Values, v.object({ customer: v.nullish(Values), contact: v.nullish(Values) })),
  ),
})

export const TrackBody = strict({
  trackerKey: v.string(),
  events: v.pipe(
    v.array(TrackingEvent),
    v.maxLength(MAX_EVENTS, `At most ${MAX_EVENTS} events per request.`),
  ),
})

export type TrackBody = v.InferOutput<typeof TrackBody>

// The events as PostgreSQL will store them: each event of the parsed body serialized again, so
// that what is stored is what was checked (the bytes as sent may hold a BOM, or 1e1000000, which
// PostgreSQL reads otherwise than JSON.parse did). Refused first: values that break the one value
// rule anywhere in the body (values.ts), and events over MAX_EVENT_BYTES of JSON.
export const eventsToStore = (body: unknown): string => {
  const errors = freeFormProblems(body)
  if (errors.length) refuse(400, 'The request body holds values that cannot be stored.', errors)
  const events = (body as { events: unknown[] }).events.map((event) => JSON.stringify(event))
  events.forEach((text, i) => {
    if (overBytes(text))
      errors.push({
        path: `/events/${i}`,
        message: `An event may take at most ${size(MAX_EVENT_BYTES)} of JSON.`,
      })
  })
  if (errors.length) refuse(400, 'The request body is invalid.', errors)
  return `[${events.join(',')}]`
}

// The answers and query parameters, as OpenAPI publishes them (api/schemas.ts names the answers).
export const TrackAccepted = v.object({ status: v.literal('received'), events: int })

export const Events = v.object({
  customer: describe(
    v.nullable(v.string()),
    'The customer asked for, or null for the whole account.',
  ),
  count: int,
  by_status: v.object({ received: int, applied: int, unmatched: int }),
  events: v.array(
    v.object({
      id,
      name: v.string(),
      timestamp: describe(int, 'When it happened, Unix milliseconds, as sent.'),
      identification: v.object({
        customer: v.optional(v.string()),
        contact: v.optional(v.string()),
      }),
      data: v.nullable(v.record(v.string(), v.unknown())),
      status: v.picklist(['received', 'applied', 'unmatched']),
      customer_service_id: v.nullable(int),
      contact_service_id: v.nullable(int),
      received_at: Timestamp,
    }),
  ),
})

export const EventQuery = {
  customer: { description: "Only this customer's events (its external id).", schema: nonEmpty },
  limit: limitParam(50, 1000),
}
