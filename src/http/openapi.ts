import * as v from 'valibot'
import { toJsonSchema, type JsonSchema } from '@valibot/to-json-schema'
import { MAX_BODY_BYTES } from './adapter.ts'
import type { Route } from './types.ts'

// The Problem Details body every error carries (errors.ts builds it).
const ProblemDetails = v.object({
  type: v.string(),
  title: v.string(),
  status: v.pipe(v.number(), v.integer()),
  detail: v.string(),
  errors: v.optional(
    v.array(
      v.object({
        path: v.pipe(v.string(), v.description('JSON pointer into the request, e.g. /customers/3/metrics/0/date')),
        message: v.string(),
      }),
    ),
  ),
})

// Checks (v.check, v.custom) and transforms (v.trim) have no JSON Schema form: they are left out,
// so the document states the structural part of each rule and the server enforces the rest.
// Lazy schemas choose their schema from the input value, which a static document cannot show;
// the definition the converter still collects for them is then unreferenced and dropped.
const toSchema = (schema: v.GenericSchema): JsonSchema => {
  const {
    $schema: _,
    $defs: __,
    ...json
  } = toJsonSchema(schema, {
    target: 'draft-2020-12',
    errorMode: 'ignore',
    overrideSchema: ({ valibotSchema }) =>
      valibotSchema.type === 'lazy'
        ? { description: 'Its form depends on the value; see the error messages.' }
        : undefined,
  })
  return json
}

const headers = {
  'Retry-After': { description: 'Whole seconds to wait.', schema: { type: 'integer', minimum: 1 } },
  'RateLimit-Limit': { description: 'Requests allowed per minute for this key.', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
}
const headerRefs = (names: string[]) => Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]))
const rateLimitHeaders = headerRefs(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'])

const problemResponses: Record<number, { name: string; description: string; headers?: string[] }> = {
  400: {
    name: 'BadRequest',
    description: 'Invalid JSON or a body that fails validation; `errors` lists every problem.',
  },
  401: { name: 'Unauthorized', description: 'The credentials are missing (or, for tracking and admin, not valid).' },
  403: { name: 'Forbidden', description: 'The key is unknown or revoked, or lacks the scope.' },
  404: { name: 'NotFound', description: 'No such record (or no such route).' },
  409: { name: 'Conflict', description: 'It already exists.' },
  406: {
    name: 'NotAcceptable',
    description:
      "The request is not JSON, does not accept JSON, or the account's records are owned by another source of truth.",
  },
  413: { name: 'ContentTooLarge', description: `The body is larger than ${MAX_BODY_BYTES} bytes.` },
  429: {
    name: 'TooManyRequests',
    description: 'Over the per-key rate limit (or too many unprocessed uploads).',
    headers: Object.keys(headers),
  },
  490: { name: 'ScoringNotConfigured', description: 'The account has no customer scoring model.' },
}

const components = () => ({
  securitySchemes: {
    serviceKey: {
      type: 'apiKey',
      in: 'header',
      name: 'service-key',
      description: 'An API key (`sk_...`) with the scope the operation names.',
    },
    adminToken: { type: 'http', scheme: 'bearer', description: 'SERVICE_ADMIN_TOKEN' },
  },
  schemas: { ProblemDetails: toSchema(ProblemDetails) },
  headers,
  responses: Object.fromEntries(
    Object.values(problemResponses).map((r) => [
      r.name,
      {
        description: r.description,
        ...(r.headers && { headers: headerRefs(r.headers) }),
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/ProblemDetails' } } },
      },
    ]),
  ),
})

const hasBody = (r: Route) => !!r.body || r.method === 'POST' || r.method === 'PUT'
const pathParams = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1])

// Which Problem Details an operation may answer, from what the router does for its auth and options.
const errorStatuses = (r: Route) => [
  ...(hasBody(r) ? [400, 413] : []),
  ...(r.auth !== 'none' ? [401] : []),
  ...(typeof r.auth === 'object' ? [403, 429] : []),
  ...(pathParams(r.path).length ? [404] : []),
  ...(r.jsonOnly ? [406] : []),
  ...(r.refusals ?? []),
]

const operation = (r: Route) => {
  // An empty body reads as {} (validate.ts), so a body whose fields are all optional may be left out.
  const bodyRequired = r.body ? !v.safeParse(r.body, {}).success : false
  return {
    operationId:
      r.name ??
      r.method.toLowerCase() +
        r.path.replace(/[^A-Za-z0-9]+(\w)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase()),
    summary: r.summary,
    tags: [r.auth === 'admin' ? 'admin' : r.auth === 'none' ? 'operations' : r.auth.key],
    security: r.auth === 'admin' ? [{ adminToken: [] }] : r.auth === 'none' ? [] : [{ serviceKey: [] }],
    ...(pathParams(r.path).length && {
      parameters: pathParams(r.path).map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    }),
    ...(r.body && {
      requestBody: { required: bodyRequired, content: { 'application/json': { schema: toSchema(r.body) } } },
    }),
    responses: {
      '2XX': {
        description: 'Success',
        ...(typeof r.auth === 'object' && { headers: rateLimitHeaders }),
      },
      ...Object.fromEntries(
        errorStatuses(r).map((s) => [String(s), { $ref: `#/components/responses/${problemResponses[s].name}` }]),
      ),
    },
  }
}

const description = `Generated from the service's routing table and the valibot schemas that validate each request.
Every error is RFC 9457 Problem Details (application/problem+json). A method not listed for a path answers
405 with an Allow header; a path not listed answers 404.`

// A pure function of the routing table: the same rows that build the router build the document.
export const buildOpenApi = (routes: Route[], version = '1.0.0') => {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, '{$1}')
    ;(paths[path] ??= {})[r.method.toLowerCase()] = operation(r)
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Customer and contact data service', version, description },
    paths,
    components: components(),
  }
}
