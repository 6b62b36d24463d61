import type { Reply } from './types.ts'

export interface FieldError { path: string; message: string }

const titles: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 406: 'Not Acceptable', 409: 'Conflict', 413: 'Content Too Large',
  429: 'Too Many Requests', 490: 'Scoring Not Configured', 500: 'Internal Server Error',
  501: 'Not Implemented', 503: 'Service Unavailable',
}

// RFC 9457 Problem Details.
export const problem = (
  status: number,
  detail: string,
  errors?: FieldError[],
  headers?: Record<string, string>,
): Reply => ({
  status,
  headers: { 'content-type': 'application/problem+json', ...headers },
  body: { type: 'about:blank', title: titles[status] ?? 'Error', status, detail, ...(errors && { errors }) },
})

// Thrown anywhere below a handler; the router turns it into its Problem Details reply.
export class HttpError extends Error {
  constructor(readonly reply: Reply) { super(String((reply.body as { detail?: string })?.detail)) }
}

export const fail = (status: number, detail: string, errors?: FieldError[], headers?: Record<string, string>): never => {
  throw new HttpError(problem(status, detail, errors, headers))
}
