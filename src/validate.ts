import * as v from 'valibot'
import { DATE_RULE, isDate } from './dates.ts'
import { refuse, type FieldError } from './errors.ts'

// PostgreSQL text and jsonb can hold neither NUL nor an unpaired surrogate (JSON.stringify writes
// one as a \ud800 escape, which jsonb refuses).
export const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
export const UNSTORABLE_MESSAGE = 'Must not contain NUL characters or unpaired surrogates.'

// Such strings are the client's error (400), not the database's (500).
export const storable = v.check((s: string) => !UNSTORABLE.test(s), UNSTORABLE_MESSAGE)

export const text255 = v.pipe(v.string(), v.maxLength(255, 'At most 255 characters.'), storable)
export const id255 = v.pipe(
  v.string(),
  v.minLength(1, 'Must not be empty.'),
  v.maxLength(255, 'At most 255 characters.'),
  storable,
)
export const DateString = v.pipe(
  v.string(),
  v.check((s: string) => isDate(s), `Must be ${DATE_RULE}.`),
)

// valibot's record() takes arrays for objects, so plain objects are checked first.
export const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x)

export const pointer = (path?: { key: unknown }[]) =>
  path?.length ? '/' + path.map((p) => String(p.key).replace(/~/g, '~0').replace(/\//g, '~1')).join('/') : ''

export const issuesToErrors = (issues: v.BaseIssue<unknown>[]): FieldError[] =>
  issues.map((i) => ({ path: pointer(i.path as { key: unknown }[] | undefined), message: i.message }))

// The valid input, or a 400 listing every problem.
export const parse = <S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> => {
  const result = v.safeParse(schema, input, { abortEarly: false })
  if (!result.success) refuse(400, 'The request body is invalid.', issuesToErrors(result.issues))
  return result.output as v.InferOutput<S>
}
