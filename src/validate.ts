import * as v from 'valibot'
import { DATE_RULE, isDate } from './dates.ts'
import { refuse, type FieldError } from './errors.ts'

// PostgreSQL text and jsonb can hold neither NUL nor an unpaired surrogate (JSON.stringify writes
// one as a \ud800 escape, which jsonb refuses).
export const UNSTORABLE =
  /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
export const UNSTORABLE_MESSAGE = 'Must not contain NUL characters or unpaired surrogates.'

// Such strings are the client's error (400), not the database's (500).
export const storable = v.check((s: string) => !UNSTORABLE.test(s), UNSTORABLE_MESSAGE)

// The storable form of a name the service keeps only to show it (a dropped key's name, a reason's
// detail): each NUL or unpaired surrogate becomes U+FFFD. A name the service acts on is
// refused instead.
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g')
export const storableText = (s: string) => s.replace(UNSTORABLE_ALL, '\uFFFD')

// The first n characters (code points) of s: never half of a surrogate pair.
export const cutText = (s: string, n: number) => {
  if (s.length <= n) return s
  let end = 0
  for (let k = 0; k < n && end < s.length; k++)
    end += (s.codePointAt(end) as number) > 0xffff ? 2 : 1
  return s.slice(0, end)
}

// Characters (code points), as the limits count them.
export const characters = (s: string) => {
  let n = 0
  for (const _ of s) n++
  return n
}

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
  // As much of the rule as a pattern states (the year is not 0000); `format: date`
  // adds the calendar.
  v.metadata({
    format: 'date',
    pattern: '^(?!0000)\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$',
  }),
)

// valibot's record() takes arrays for objects, so plain objects are checked first.
export const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x)

// `schema`, except that input `accepts` vouches for is taken at once, as it is: for the parts of a
// body that repeat by the thousand (an upload's 12,000 snapshots), where valibot builds a dataset,
// an output copy and a union's tries for every value. Anything else, an error included, runs
// `schema`, so the issues and the published JSON Schema are its own. `accepts` takes only input
// that `schema` takes and outputs equal to it.
export const quick = <S extends v.GenericSchema>(
  schema: S,
  accepts: (input: unknown) => boolean,
): S =>
  ({
    ...schema,
    '~run'(dataset: v.UnknownDataset, config: v.Config<v.BaseIssue<unknown>>) {
      if (!accepts(dataset.value)) return schema['~run'](dataset, config)
      return { typed: true, value: dataset.value } as ReturnType<S['~run']>
    },
  }) as S

// Whether every key of an object is one valibot's object and record schemas copy (they skip
// inherited keys and __proto__, prototype and constructor) and every value but `skip`'s
// passes `ok`.
export const everyValue = (
  object: Record<string, unknown>,
  ok: (value: unknown) => boolean,
  skip?: string,
) => {
  for (const key in object) {
    if (
      !Object.hasOwn(object, key) ||
      key === '__proto__' ||
      key === 'prototype' ||
      key === 'constructor'
    )
      return false
    if (key !== skip && !ok(object[key])) return false
  }
  return true
}

// A name the client sent, echoed in an answer, is cut to this many characters: a 4.5 MB key must
// not come back as a 4.5 MB answer.
const ECHO_CHARS = 200
export const cut = (name: string) => {
  const head = cutText(name, ECHO_CHARS)
  return head === name ? name : `${head}... (${count(characters(name))} characters)`
}

// The SQL twin of cut, for names read in SQL (Segment's dropped trait keys): left() and
// char_length() count code points, as cut does. `s` is written several times: keep it a cheap one.
export const sqlCut = (s: string) =>
  `case when char_length(${s}) > ${ECHO_CHARS} then left(${s}, ${ECHO_CHARS}) || '... (' ||
    to_char(char_length(${s}), 'FM999,999,999,999') || ' characters)' else ${s} end`

// 1,980: counts as people read them.
export const count = (n: number) => n.toLocaleString('en-US')

// 5 MB, 32 KB: sizes as people read them (binary units, as the limits are set).
export const size = (bytes: number) => {
  const [unit, scale] =
    bytes >= 1024 ** 2 ? ['MB', 1024 ** 2] : bytes >= 1024 ? ['KB', 1024] : ['bytes', 1]
  return `${Number((bytes / (scale as number)).toFixed(1))} ${unit}`
}

type PathItem = { key: unknown }

// A key as one reference token of a JSON pointer (RFC 6901), and back.
export const pointerToken = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1')
export const keyOfToken = (token: string) => token.replace(/~1/g, '/').replace(/~0/g, '~')

export const pointer = (path?: PathItem[]) =>
  path?.length ? '/' + path.map((p) => pointerToken(cut(String(p.key)))).join('/') : ''

// filters[2].operator: how a reader names a field in a sentence.
const dotted = (path: PathItem[] = []) =>
  path
    .map((p, i) =>
      typeof p.key === 'number'
        ? `[${p.key}]`
        : i === 0
          ? cut(String(p.key))
          : `.${cut(String(p.key))}`,
    )
    .join('')

const listed = (items: string[]) =>
  items.length < 2
    ? items.join('')
    : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`

// Plain sentences for the issues valibot raises without a message of ours: what is wrong and what
// is allowed (the path beside the message names the field). Set once, for every schema.
const NUMBER_MESSAGE = 'Must be a number.'
const plainMessage = (issue: v.BaseIssue<unknown>): string => {
  const { type, requirement: limit, expected, input } = issue
  const unit = typeof input === 'string' ? 'characters' : 'items'
  switch (type) {
    case 'string':
      return 'Must be a string.'
    case 'number':
      return NUMBER_MESSAGE
    case 'boolean':
      return 'Must be true or false.'
    case 'array':
      return 'Must be an array.'
    case 'object':
    case 'strict_object':
    case 'loose_object':
    case 'object_with_rest':
      return input === undefined && expected?.startsWith('"')
        ? 'Is required.'
        : 'Must be an object.'
    case 'picklist':
      // valibot writes the options as ("a" | "b"), one option without the parentheses.
      return `Must be one of ${listed(
        (expected ?? '')
          .replace(/^\((.*)\)$/, '$1')
          .split(' | ')
          .map((o) => o.replace(/^"|"$/g, '')),
      )}.`
    case 'integer':
    case 'safe_integer':
      return 'Must be a whole number.'
    case 'min_value':
      return `Must be at least ${limit}.`
    case 'max_value':
      return `Must be at most ${limit}.`
    case 'min_length':
      return `Must have at least ${limit} ${unit}.`
    case 'max_length':
      return `Must have at most ${limit} ${unit}.`
    case 'non_empty':
      return 'Must not be empty.'
    case 'email':
      return 'Must be an email address.'
    case 'url':
      return 'Must be an absolute URL.'
    default:
      return 'Has a value that is not allowed here.'
  }
}
v.setGlobalMessage(plainMessage)

const distance = (a: string, b: string) => {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const next = [i]
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    row = next
  }
  return row[b.length]
}

// The known key a typo most likely meant: the nearest within two edits (more for long keys), or
// none. Keys whose lengths differ by more than that are not compared (a huge key costs nothing).
export const closest = (key: string, known: string[]) => {
  const within = Math.max(2, Math.floor(key.length / 3))
  const ranked = known
    .filter((k) => Math.abs(k.length - key.length) <= within)
    .map((k) => ({ k, d: distance(key.toLowerCase(), k.toLowerCase()) }))
    .sort((a, b) => a.d - b.d)
  return ranked.length && ranked[0].d <= within ? ranked[0].k : undefined
}

// The known name a word most likely means: the one it is a typo of, else the shortest that begins
// with it or has a word (between underscores) that does, for a word of three characters or more:
// "engagement" means engagementscore, "churn" churn_risk, "risk" churn_risk.
export const meant = (word: string, known: string[]) => {
  const typo = closest(word, known)
  if (typo || word.length < 3) return typo
  const w = word.toLowerCase()
  const shortest = (names: string[]) =>
    names.sort((a, b) => a.length - b.length || (a < b ? -1 : 1))[0]
  return (
    shortest(known.filter((k) => k.toLowerCase().startsWith(w))) ??
    shortest(
      known.filter((k) =>
        k
          .toLowerCase()
          .split('_')
          .some((part) => part.startsWith(w)),
      ),
    )
  )
}

// An object whose unknown keys are refused, each named with the key it most likely meant: a typo
// that silently dropped a field or widened a query would be a correctness bug.
// Arrays are refused too: valibot takes any non-null object for one.
export const strict = <E extends v.ObjectEntries>(entries: E) => {
  const known = Object.keys(entries)
  return v.pipe(
    v.custom<Record<string, unknown>>(isObject, 'Must be an object.'),
    v.strictObject(entries, (issue) => {
      if (issue.expected !== 'never') return plainMessage(issue)
      const meant = closest(String(issue.input), known)
      return `${meant ? ` (did you mean ${meant}?)` : ''}; the allowed keys are ${listed(known)}.`
    }),
  )
}

const isUnknownKey = (i: v.BaseIssue<unknown>) =>
  i.type === 'strict_object' && i.expected === 'never'

export const issuesToErrors = (issues: v.BaseIssue<unknown>[]): FieldError[] =>
  issues.map((i) => {
    const path = i.path as PathItem[] | undefined
    const message = isUnknownKey(i) ? `Unknown key ${dotted(path)}${i.message}` : i.message
    return { path: pointer(path), message }
  })

// The valid input, or a 400 listing every problem.
export const parse = <S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> => {
  const result = v.safeParse(schema, input, { abortEarly: false })
  if (!result.success) refuse(400, 'The request body is invalid.', issuesToErrors(result.issues))
  return result.output as v.InferOutput<S>
}

// Building blocks of the response schemas that OpenAPI publishes, and of query parameters.
export const describe = <S extends v.GenericSchema>(schema: S, text: string) =>
  v.pipe(schema, v.description(text))
export const int = v.pipe(v.number(), v.integer())
// A probability, 0 to 1: the learned churn probability, its model's AUC and calibration.
export const Probability = v.pipe(v.number(), v.minValue(0), v.maxValue(1))
export const id = describe(int, 'The id the service gave it.')
export const Timestamp = describe(
  v.pipe(v.string(), v.isoTimestamp()),
  'A UTC time, ISO 8601 with milliseconds.',
)
export const Day = describe(v.pipe(v.string(), v.isoDate()), 'A calendar date, YYYY-MM-DD.')
export const nonEmpty = v.pipe(v.string(), v.minLength(1), v.maxLength(255))

// Query parameters are text. A number parameter takes canonical decimal integers only (7; never
// 7.0, -0, 07, +7 or 7e0), so that one value has one spelling: every number parameter is a whole
// number. Any other text stays text, which the parameter's number schema refuses: with the schema's
// own message (one that names the allowed values), or else with this one.
export const QUERY_INTEGER = /^(0|-?[1-9]\d*)$/
export const queryNumberMessage = (message: string) =>
  message === NUMBER_MESSAGE
    ? 'Must be a whole number in decimal digits, such as 7 (not 7.0, 07 or +7).'
    : message

// A ?limit= query parameter: how many rows, newest first.
export const limitParam = (fallback: number, max: number) => ({
  description: `How many, newest first (default ${fallback}).`,
  schema: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(max)), fallback),
})
