import * as v from 'valibot'
import { fail, type FieldError } from './errors.ts'
import type { Req } from './types.ts'
import { UNSTORABLE } from '../storable.ts'

export const pointer = (path?: { key: unknown }[]) =>
  path?.length ? '/' + path.map((p) => String(p.key).replace(/~/g, '~0').replace(/\//g, '~1')).join('/') : ''

export const issuesToErrors = (issues: v.BaseIssue<unknown>[]): FieldError[] =>
  issues.map((i) => ({ path: pointer(i.path as { key: unknown }[] | undefined), message: i.message }))

export const parse = <S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> => {
  const result = v.safeParse(schema, input, { abortEarly: false })
  if (!result.success) fail(400, 'The request body is invalid.', issuesToErrors(result.issues))
  return result.output as v.InferOutput<S>
}

// An empty body counts as {} so that "all fields optional" requests may omit it entirely.
export const readJson = (req: Req): unknown => {
  if (req.body.length === 0) return {}
  try {
    return JSON.parse(req.body.toString('utf8'))
  } catch {
    return fail(400, 'The request body is not valid JSON.')
  }
}

// External ids may hold any character, so they arrive percent-encoded; a malformed escape names no record.
export const textParam = (req: Req, name: string) => {
  try { return decodeURIComponent(req.params[name]) } catch { return fail(404, `No record with that ${name}.`) }
}

// Such strings are the client's error (400), not the database's (500).
export const storable = v.check((s: string) => !UNSTORABLE.test(s), 'Must not contain NUL characters or unpaired surrogates.')
