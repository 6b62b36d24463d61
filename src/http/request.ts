import { gunzipSync } from 'node:zlib'
import * as v from 'valibot'
import { refuse } from '../errors.ts'
import { decoded, type Query, type Req } from '../route.ts'
import { issuesToErrors, QUERY_INTEGER, queryNumberMessage } from '../validate.ts'
import { MAX_BODY_BYTES } from './adapter.ts'

// ignoreBOM false: a leading byte order mark is dropped, as RFC 8259 lets a parser do, on every
// route alike (handlers store the parsed value, never the bytes, so it reaches nothing else).
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

// A body sent with Content-Encoding: gzip (RudderStack's SDK does by default) is read inflated,
// to at most MAX_BODY_BYTES as any body; req.body becomes the inflated bytes, which size
// limits then measure.
const inflated = (req: Req) => {
  const encoding = String(req.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase()
  if (encoding === 'identity') return
  if (encoding !== 'gzip')
    refuse(415, `The body's Content-Encoding must be gzip or none, not ${encoding.slice(0, 40)}.`)
  try {
    req.body = gunzipSync(req.body, { maxOutputLength: MAX_BODY_BYTES })
  } catch (err) {
    const tooLarge = (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE'
    refuse(
      tooLarge ? 413 : 400,
      tooLarge
        ? `The inflated body is larger than ${MAX_BODY_BYTES} bytes.`
        : 'The gzip body is corrupt.',
    )
  }
  delete req.headers['content-encoding']
}

// An empty body counts as {} so that "all fields optional" requests may omit it entirely. Text
// that is not UTF-8 is refused rather than stored with U+FFFD in place of what was sent.
export const readJson = (req: Req): unknown => {
  inflated(req)
  if (req.body.length === 0) return {}
  let text: string
  try {
    text = utf8.decode(req.body)
  } catch {
    return refuse(400, 'The request body is not valid UTF-8.')
  }
  try {
    return JSON.parse(text)
  } catch {
    return refuse(400, 'The request body is not valid JSON.')
  }
}

// JSON is UTF-8 (RFC 8259); a body declared in another charset is refused: 406 where the routes
// answer 406 for anything but a JSON exchange (uploads, single-record writes), 415 elsewhere.
export const requireUtf8 = (req: Req, status: 406 | 415) => {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.headers['content-type'] ?? '')?.[1]
  if (charset && !/^utf-?8$/i.test(charset))
    refuse(status, `The body must be UTF-8, not ${charset.slice(0, 40)}.`)
}

const MAX_QUERY_VALUE = 1024

// Query parameters are checked like body fields before any handler reads them: valid UTF-8
// percent-encoding, no NUL, at most MAX_QUERY_VALUE characters.
export const checkQuery = (req: Req) => {
  if (!req.url.includes('?')) return
  const query = req.url.split('?')[1].split('#')[0]
  if (!query) return
  const errors = query.split('&').flatMap((pair) => {
    const [key, value = ''] = pair.split('=', 2)
    const name = decoded(key, 100, true)
    if (name === undefined)
      return [{ path: '/query', message: 'A parameter name is not valid percent-encoded UTF-8.' }]
    return decoded(value, MAX_QUERY_VALUE, true) === undefined
      ? [
          {
            path: `/query/${name}`,
            message: `Must be percent-encoded UTF-8 text of at most ${MAX_QUERY_VALUE} characters, without NUL.`,
          },
        ]
      : []
  })
  if (errors.length) refuse(400, 'The query string is invalid.', errors)
}

const isNumber = (schema: v.GenericSchema): boolean =>
  schema.type === 'number' || ('wrapped' in schema && isNumber(schema.wrapped as v.GenericSchema))

// A route's parameters as one object schema, built once per routing table row.
const objects = new WeakMap<Query, v.GenericSchema>()
const objectOf = (declared: Query) => {
  let schema = objects.get(declared)
  if (!schema) {
    const entries = Object.entries(declared).map(([name, q]) => [
      name,
      q.schema.type === 'optional' ? q.schema : v.optional(q.schema),
    ])
    objects.set(declared, (schema = v.object(Object.fromEntries(entries))))
  }
  return schema
}

// The declared query parameters, each parsed by its schema, once: a repeated parameter, a value
// outside its schema (an enum's other words, an empty ?limit=) is a 400 naming /query/<name>, never
// a silently wider answer. Every parameter is optional; parameters a route does not declare are
// ignored, as caches and proxies add their own.
export const parseQuery = (declared: Query, raw: Req['query']) => {
  const given = Object.fromEntries(
    Object.entries(declared).flatMap(([name, { schema }]) => {
      const value = raw[name]
      return value === undefined
        ? []
        : [
            [
              name,
              typeof value === 'string' && isNumber(schema) && QUERY_INTEGER.test(value)
                ? Number(value)
                : value,
            ],
          ]
    }),
  )
  const repeated = (name: string) => Array.isArray(given[name])
  const numeric = (name: string) => name in declared && isNumber(declared[name].schema)
  const result = v.safeParse(objectOf(declared), given, { abortEarly: false })
  const errors = [
    ...Object.keys(given)
      .filter(repeated)
      .map((name) => ({ path: `/query/${name}`, message: 'Given more than once; give it once.' })),
    ...(result.success ? [] : issuesToErrors(result.issues))
      .filter((e) => !repeated(e.path.split('/')[1]))
      .map((e) => ({
        ...e,
        path: `/query${e.path}`,
        message: numeric(e.path.split('/')[1]) ? queryNumberMessage(e.message) : e.message,
      })),
  ]
  if (errors.length) refuse(400, 'The query string is invalid.', errors)
  return result.output as Record<string, unknown>
}

const isJson = (value: string | undefined) =>
  !!value && /^application\/(.+\+)?json\s*(;|$)/i.test(value)
const acceptsJson = (accept: string | undefined) =>
  !accept ||
  accept.split(',').some((a) => /^\s*(application\/json|application\/\*|\*\/\*)\s*(;|$)/i.test(a))

// Uploads and single-record writes answer 406 unless the request is JSON and accepts JSON.
export const requireJsonExchange = (req: Req) => {
  if (!isJson(req.headers['content-type']))
    refuse(406, 'The request must be sent as application/json.')
  if (!acceptsJson(req.headers.accept))
    refuse(406, 'The response is only available as application/json.')
}
