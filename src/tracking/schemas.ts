import * as v from 'valibot'
import { fail, type FieldError } from '../http/errors.ts'

export const MAX_EVENTS = 100
export const MAX_EVENT_BYTES = 32 * 1024
// Whole milliseconds from 2000-01-01 up to 2100-01-01: the lower bound catches the usual mistake
// of sending Unix seconds (1.7e9 ms is January 1970).
export const MIN_TIMESTAMP = Date.UTC(2000, 0, 1)
export const MAX_TIMESTAMP = Date.UTC(2100, 0, 1) - 1

const id255 = v.pipe(v.string(), v.minLength(1, 'Must not be empty.'), v.maxLength(255, 'At most 255 characters.'))
// valibot's record() takes arrays for objects, so plain objects are checked on their own.
const isObject = (x: unknown) => typeof x === 'object' && x !== null && !Array.isArray(x)
const Values = v.custom<Record<string, unknown>>(isObject, 'Must be an object.')

export const TrackingEvent = v.object({
  name: v.pipe(v.string(), v.minLength(1, 'Must not be empty.'), v.maxLength(255, 'At most 255 characters.')),
  timestamp: v.pipe(
    v.number(),
    v.integer('Must be a whole number of milliseconds.'),
    v.minValue(MIN_TIMESTAMP, 'Must be Unix time in milliseconds (not seconds), from 2000-01-01.'),
    v.maxValue(MAX_TIMESTAMP, 'Must be Unix time in milliseconds, before 2100-01-01.'),
  ),
  identification: v.object({ customer: id255, contact: v.nullish(id255) }),
  data: v.nullish(v.object({ customer: v.nullish(Values), contact: v.nullish(Values) })),
})

export const TrackBody = v.object({
  trackerKey: v.string(),
  events: v.pipe(v.array(TrackingEvent), v.maxLength(MAX_EVENTS, `At most ${MAX_EVENTS} events per request.`)),
})

export type TrackingEvent = v.InferOutput<typeof TrackingEvent>
export type TrackBody = v.InferOutput<typeof TrackBody>

// PostgreSQL text and jsonb cannot hold NUL or unpaired surrogates.
const BAD_TEXT = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

// The path of the first string (keys included) that PostgreSQL cannot store, or null.
const unstorable = (value: unknown, path: string): string | null => {
  if (typeof value === 'string') return BAD_TEXT.test(value) ? path : null
  if (typeof value !== 'object' || value === null) return null
  for (const [key, item] of Object.entries(value)) {
    const p = `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`
    if (BAD_TEXT.test(key)) return p
    const found = unstorable(item, p)
    if (found) return found
  }
  return null
}

// Serializes the validated events into one JSON array for the insert, checking each event's size
// (SPEC section 7: at most 32 KB serialized) on the way; JSON.stringify escapes NUL and lone
// surrogates, so only an event containing such an escape needs the deeper look.
export const encodeEvents = (events: TrackingEvent[]): string => {
  const errors: FieldError[] = []
  const parts = events.map((event, i) => {
    const json = JSON.stringify(event)
    if (json.length * 3 > MAX_EVENT_BYTES && Buffer.byteLength(json) > MAX_EVENT_BYTES) {
      errors.push({ path: `/events/${i}`, message: `An event may take at most ${MAX_EVENT_BYTES} bytes as JSON.` })
    } else if (json.includes('\\u0000') || /\\ud[89a-f]/.test(json)) {
      const path = unstorable(event, `/events/${i}`)
      if (path) errors.push({ path, message: 'Must not contain NUL characters or unpaired surrogates.' })
    }
    return json
  })
  if (errors.length) fail(400, 'The request body is invalid.', errors)
  return `[${parts.join(',')}]`
}
