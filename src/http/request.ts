import { refuse } from '../errors.ts'
import type { Req } from './types.ts'

// An empty body counts as {} so that "all fields optional" requests may omit it entirely.
export const readJson = (req: Req): unknown => {
  if (req.body.length === 0) return {}
  try {
    return JSON.parse(req.body.toString('utf8'))
  } catch {
    return refuse(400, 'The request body is not valid JSON.')
  }
}

// External ids may hold any character, so they arrive percent-encoded; a malformed escape names no record.
export const textParam = (req: Req, name: string) => {
  try {
    return decodeURIComponent(req.params[name])
  } catch {
    return refuse(404, `No record with that ${name}.`)
  }
}

// A numeric id in the path; anything else names nothing (404).
export const idParam = (req: Req, name: string) => {
  const n = Number(req.params[name])
  return Number.isSafeInteger(n) && n > 0
    ? n
    : refuse(404, `No such ${name.replace('_id', '').replace(/^id$/, 'account')}.`)
}

const isJson = (value: string | undefined) => !!value && /^application\/(.+\+)?json\s*(;|$)/i.test(value)
const acceptsJson = (accept: string | undefined) =>
  !accept || accept.split(',').some((a) => /^\s*(application\/json|application\/\*|\*\/\*)\s*(;|$)/i.test(a))

// Uploads and single-record writes answer 406 unless the request is JSON and accepts JSON.
export const requireJsonExchange = (req: Req) => {
  if (!isJson(req.headers['content-type'])) refuse(406, 'The request must be sent as application/json.')
  if (!acceptsJson(req.headers.accept)) refuse(406, 'The response is only available as application/json.')
}
