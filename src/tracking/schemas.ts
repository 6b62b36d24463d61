import * as v from 'valibot'
import { refuse, type FieldError } from '../errors.ts'
import { id255, isObject, strict, UNSTORABLE, UNSTORABLE_MESSAGE } from '../validate.ts'

export const MAX_EVENTS = 100
export const MAX_EVENT_BYTES = 32 * 1024
// Whole milliseconds from 2000-01-01 up to 2100-01-01: the lower bound catches the usual mistake
// of sending Unix seconds (1.7e9 ms is January 1970).
export const MIN_TIMESTAMP = Date.UTC(2000, 0, 1)
export const MAX_TIMESTAMP = Date.UTC(2100, 0, 1) - 1

const Values = v.pipe(
  v.custom<Record<string, unknown>>(isObject, 'Must be an object.'),
  v.record(v.string(), v.unknown()),
)

export const TrackingEvent = strict({
  name: v.pipe(v.string(), v.minLength(1, 'Must not be empty.'), v.maxLength(255, 'At most 255 characters.')),
  timestamp: v.pipe(
    v.number(),
    v.check(
      (t: number) => Number.isInteger(t) && t >= MIN_TIMESTAMP && t <= MAX_TIMESTAMP,
      'Must be Unix time in whole milliseconds (not seconds), from 2000-01-01 to 2099-12-31.',
    ),
    v.metadata({ type: 'integer', minimum: MIN_TIMESTAMP, maximum: MAX_TIMESTAMP }),
  ),
  identification: strict({ customer: id255, contact: v.nullish(id255) }),
  data: v.nullish(v.pipe(Values, v.object({ customer: v.nullish(Values), contact: v.nullish(Values) }))),
})

export const TrackBody = strict({
  trackerKey: v.string(),
  events: v.pipe(v.array(TrackingEvent), v.maxLength(MAX_EVENTS, `At most ${MAX_EVENTS} events per request.`)),
})

export type TrackBody = v.InferOutput<typeof TrackBody>

// In JSON text they can only come as escapes (raw bytes of them are not UTF-8).
const BAD_ESCAPE = /\\u0000|\\u[dD][89a-fA-F]/

// The JSON pointer of a string (key or value) that PostgreSQL cannot store, or null. Iterative,
// with paths built only for the finding: JSON.parse accepts nesting deeper than the call stack.
interface Node {
  value: unknown
  key: string
  parent: Node | null
}
const pointerOf = (node: Node, key?: string): string => {
  const keys = key === undefined ? [] : [key]
  for (let n: Node | null = node; n?.parent; n = n.parent) keys.push(n.key)
  return keys
    .reverse()
    .map((k) => '/' + k.replace(/~/g, '~0').replace(/\//g, '~1'))
    .join('')
}
const unstorable = (root: unknown): string | null => {
  const stack: Node[] = [{ value: root, key: '', parent: null }]
  for (let node = stack.pop(); node; node = stack.pop()) {
    if (typeof node.value === 'string' && UNSTORABLE.test(node.value)) return pointerOf(node)
    if (typeof node.value !== 'object' || node.value === null) continue
    for (const [key, value] of Object.entries(node.value)) {
      if (UNSTORABLE.test(key)) return pointerOf(node, key)
      stack.push({ value, key, parent: node })
    }
  }
  return null
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

// The byte length of each element of the top-level "events" array as it appears in the body, by
// one pass over the bytes (the body is known to be valid JSON; as in JSON.parse, the last "events"
// key wins). Quotes and backslashes never occur inside multi-byte UTF-8 sequences.
export const eventSizes = (body: Uint8Array): number[] => {
  let sizes: number[] = []
  let current: number[] | null = null
  let depth = 0
  let stringStart = -1
  let lastString: string | null = null
  let key: string | null = null
  let elementStart = -1
  let last = -1
  for (let i = 0; i < body.length; i++) {
    const c = body[i]
    if (stringStart >= 0) {
      if (c === BACKSLASH) i++
      else if (c === QUOTE) {
        // Strings at depth 1 may be keys; "events" takes at most 36 bytes even fully escaped.
        lastString =
          depth === 1 && i - stringStart <= 40
            ? JSON.parse(Buffer.from(body.subarray(stringStart, i + 1)).toString('utf8'))
            : null
        stringStart = -1
        last = i
      }
      continue
    }
    if (isSpace(c)) continue
    if (current && depth === 2 && elementStart < 0 && c !== 0x5d && c !== 0x2c) elementStart = i
    if (c === QUOTE) stringStart = i
    else if (c === 0x3a && depth === 1) key = lastString
    else if (c === 0x2c) {
      if (current && depth === 2) {
        current.push(last - elementStart + 1)
        elementStart = -1
      }
      if (depth === 1) key = null
    } else if (c === 0x7b || c === 0x5b) {
      if (depth === 1 && c === 0x5b && key === 'events') {
        current = []
        elementStart = -1
      }
      depth++
    } else if (c === 0x7d || c === 0x5d) {
      if (current && depth === 2) {
        if (elementStart >= 0) current.push(last - elementStart + 1)
        sizes = current
        current = null
      }
      depth--
    }
    last = i
  }
  return sizes
}

// What the schema cannot see, on the raw body (it is stored as sent): each event at most 32 KB of
// JSON as sent (only a body over 32 KB can hold a larger one), and no string that
// PostgreSQL cannot store (only a body with a \u escape can hold one).
export const checkRawEvents = (body: Buffer) => {
  const errors: FieldError[] = []
  if (body.length > MAX_EVENT_BYTES) {
    eventSizes(body).forEach((size, i) => {
      if (size > MAX_EVENT_BYTES)
        errors.push({ path: `/events/${i}`, message: `An event may take at most ${MAX_EVENT_BYTES} bytes of JSON.` })
    })
  }
  if (body.includes('\\u')) {
    const text = body.toString('utf8')
    const path = BAD_ESCAPE.test(text) ? unstorable(JSON.parse(text)) : null
    if (path !== null) errors.push({ path, message: UNSTORABLE_MESSAGE })
  }
  if (errors.length) refuse(400, 'The request body is invalid.', errors)
}
