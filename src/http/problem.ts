import type { FieldError, Refusal } from '../errors.ts'
import type { Reply } from '../route.ts'
import { count } from '../validate.ts'

// An answer lists this many field errors and counts the rest: one mistake repeated over 1,000 items
// must not make an answer of thousands of entries.
const LISTED_ERRORS = 20

export const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  490: 'Scoring Not Configured',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
}

// RFC 9457 Problem Details: the body of every error the API answers.
export const problem = (
  status: number,
  detail: string,
  errors?: FieldError[],
  headers?: Record<string, string>,
): Reply => {
  const more = errors ? errors.length - LISTED_ERRORS : 0
  const body = {
    type: 'about:blank',
    title: TITLES[status] ?? 'Error',
    status,
    detail,
    ...(errors && { errors }),
  }
  if (more > 0) {
    body.detail = `${detail} The first ${LISTED_ERRORS} errors are listed, and ${count(more)} more like these.`
    Object.assign(body, { errors: errors!.slice(0, LISTED_ERRORS), more_errors: more })
  }
  return { status, headers: { 'content-type': 'application/problem+json', ...headers }, body }
}

// The one place a domain refusal becomes HTTP.
// A 400 always names where the request is wrong: without field errors, the whole body ('').
export const refusalReply = (err: Refusal): Reply =>
  problem(
    err.status,
    err.message,
    err.errors ?? (err.status === 400 ? [{ path: '', message: err.message }] : undefined),
    err.headers,
  )
