import * as v from 'valibot'
import {
  type ConversionConfig,
  toJsonSchema,
  toJsonSchemaDefs,
  type JsonSchema,
} from '@valibot/to-json-schema'
import { MAX_BODY_BYTES } from './adapter.ts'
import { TITLES } from './problem.ts'
import { size } from '../validate.ts'
import { allows, ROLE_GRANTS, type Route, TAGS } from '../route.ts'

// The Problem Details body every error carries (errors.ts builds it).
const ProblemDetails = v.object({
  type: v.string(),
  title: v.string(),
  status: v.pipe(v.number(), v.integer()),
  detail: v.string(),
  errors: v.optional(
    v.array(
      v.object({
        path: v.pipe(
          v.string(),
          v.description('JSON pointer into the request, e.g. /customers/3/metrics/0/date'),
        ),
        message: v.string(),
      }),
    ),
  ),
  more_errors: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.description('How many errors beyond the first 20 listed were left out.'),
    ),
  ),
})

// Checks (v.check, v.custom) and transforms (v.trim) have no JSON Schema form: they are left out,
// unless the schema states them as metadata (v.metadata({ minimum, format, ... }), copied as is).
// Lazy schemas choose their schema from the input value, which a static document cannot show: a
// lazy one is published as nothing more than its metadata's `published`, a JSON Schema in which
// valibot schemas stand for their conversions (e.g. { oneOf: [A, B] }, or a named schema, which
// becomes a $ref and may recurse). Named schemas become components, referenced wherever they occur.
type Json = Record<string, unknown>
const isValibot = (x: unknown): x is v.GenericSchema =>
  typeof x === 'object' && x !== null && (x as { kind?: unknown }).kind === 'schema' && '~run' in x

const converter = (named: Record<string, v.GenericSchema>) => {
  const namedRef = new Set(Object.keys(named).map((k) => `#/$defs/${k}`))
  const one = (schema: v.GenericSchema): JsonSchema => {
    const { $schema: _, $defs: __, ...json } = toJsonSchema(schema, config)
    return json
  }
  // toJsonSchema converts every named definition again, whose `published` schemas would convert
  // them again without end: inside a conversion for `published`, those are dropped (the copies made
  // there are discarded), and each published schema is converted once.
  let nested = false
  const converted = new Map<v.GenericSchema, JsonSchema>()
  const publishedOne = (schema: v.GenericSchema) => {
    if (!converted.has(schema)) {
      const name = Object.keys(named).find((k) => named[k] === schema)
      nested = true
      try {
        // Wrapped in a pipe, whose items the converter writes out in place rather than as a $ref to
        // a definition of its own (which the lazy schemas' getters may have made of it).
        converted.set(schema, name ? { $ref: `#/$defs/${name}` } : one(v.pipe(schema)))
      } finally {
        nested = false
      }
    }
    return converted.get(schema)
  }
  const publish = (x: unknown): unknown =>
    isValibot(x)
      ? publishedOne(x)
      : Array.isArray(x)
        ? x.map(publish)
        : typeof x === 'object' && x !== null
          ? Object.fromEntries(Object.entries(x).map(([k, y]) => [k, publish(y)]))
          : x
  const config: ConversionConfig = {
    target: 'draft-2020-12',
    errorMode: 'ignore',
    definitions: named,
    overrideSchema: ({ valibotSchema, jsonSchema }) =>
      valibotSchema.type === 'lazy' && !namedRef.has(jsonSchema.$ref as string) ? {} : undefined,
    overrideAction: ({ jsonSchema }) => {
      if (!('published' in jsonSchema)) return undefined
      const { published, ...rest } = jsonSchema
      return { ...rest, ...(nested ? {} : (publish(published) as Json)) } as JsonSchema
    },
  }
  const toComponents = (json: unknown) =>
    JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/')) as JsonSchema
  return {
    schema: (schema: v.GenericSchema): JsonSchema => toComponents(one(schema)),
    // Only the named ones: the converter also lists the lazy schemas' definitions, which
    // nothing references.
    components: () =>
      toComponents(
        Object.fromEntries(
          Object.entries(toJsonSchemaDefs(named, config)).filter(([k]) => k in named),
        ),
      ),
  }
}

// One schema on its own, e.g. an event payload that the event catalog publishes.
const headers = {
  'Retry-After': { description: 'Whole seconds to wait.', schema: { type: 'integer', minimum: 1 } },
  'RateLimit-Limit': {
    description: 'Requests allowed per minute for this key.',
    schema: { type: 'integer' },
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current window.',
    schema: { type: 'integer' },
  },
  'RateLimit-Reset': {
    description: 'Seconds until the window resets.',
    schema: { type: 'integer' },
  },
}
const headerRefs = (names: string[]) =>
  Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]))
const rateLimitHeaders = headerRefs(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'])

const problemResponses: Record<
  number,
  { name: string; description: string; headers?: string[]; example: string }
> = {
  400: {
    name: 'BadRequest',
    description:
      'Invalid JSON, a body that fails validation or an invalid query string; `errors` lists every problem.',
    example: 'The request body is invalid.',
  },
  401: {
    name: 'Unauthorized',
    description: 'The credentials are missing (or, for tracking and admin, not valid).',
    example: 'The service-key header is missing.',
  },
  403: {
    name: 'Forbidden',
    description: 'The key is unknown or revoked, or lacks the scope.',
    example: 'This key does not have the search scope.',
  },
  404: {
    name: 'NotFound',
    description: 'No such record (or no such route).',
    example: 'Customer acme-9 does not exist.',
  },
  406: {
    name: 'NotAcceptable',
    description:
      "The request is not JSON, does not accept JSON, or the account's records are owned by another source of truth.",
    example: 'The request must be sent as application/json.',
  },
  408: {
    name: 'RequestTimeout',
    description:
      'No part of the request body arrived for SERVICE_BODY_IDLE_TIMEOUT_MS; the connection closes.',
    example: 'No part of the request body arrived for 10000 ms.',
  },
  409: {
    name: 'Conflict',
    description: 'It already exists.',
    example: 'Customer acme-1 already exists.',
  },
  413: {
    name: 'ContentTooLarge',
    description: `The body is larger than ${size(MAX_BODY_BYTES)}.`,
    example: `The body is larger than ${size(MAX_BODY_BYTES)}.`,
  },
  415: {
    name: 'UnsupportedMediaType',
    description: 'The body is declared in a charset other than UTF-8.',
    example: 'The body must be UTF-8, not latin1.',
  },
  422: {
    name: 'OverBudget',
    description:
      'The query ran past the statement timeout of its kind of request and was stopped; the detail names the ' +
      'budget in ms. Narrow it: fewer IN values or filters, a more selective filter, count "estimate".',
    example: 'The query ran past the search budget of 5000 ms and was stopped. Narrow it: ...',
  },
  429: {
    name: 'TooManyRequests',
    description:
      'Over the per-key rate limit, too many unprocessed uploads, or (searches, aggregates, ' +
      "segment searches) too many of the account's running at once; retry after Retry-After seconds.",
    headers: Object.keys(headers),
    example: 'Rate limit exceeded; retry in 12 seconds.',
  },
  490: {
    name: 'ScoringNotConfigured',
    description: 'The account has no customer scoring model.',
    example: 'The account has no customer scoring model.',
  },
  502: {
    name: 'BadGateway',
    description:
      "An upstream the request needs did not answer as it must (an account's identity provider).",
    example: "The identity provider's configuration could not be read.",
  },
  503: {
    name: 'ServiceUnavailable',
    description:
      'The database is not reachable, or the connection came past the connection caps (per client address or ' +
      'in all; only /healthz and /readyz are answered on it); retry after the Retry-After seconds.',
    headers: ['Retry-After'],
    example: 'The database is not reachable; try again shortly.',
  },
}

const problemExample = (status: number, text: string) =>
  status === 400
    ? {
        type: 'about:blank',
        title: TITLES[status],
        status,
        detail: text,
        errors: [
          {
            path: '/filters/0/opertor',
            message:
              'Unknown key filters[0].opertor (did you mean operator?); the allowed keys are propertyName, operator, ' +
              'value and values.',
          },
        ],
      }
    : { type: 'about:blank', title: TITLES[status], status, detail: text }

export const camel = (name: string) => name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())

// An event the service sends, published under the document's `webhooks`.
interface PublishedEvent {
  name: string
  description: string
  schema: v.GenericSchema
  example: unknown
}

const eventOperation = (e: PublishedEvent, schema: (s: v.GenericSchema) => JsonSchema) => ({
  post: {
    operationId: camel(`on-${e.name.replace('.', '-')}`),
    tags: ['events'],
    summary: e.name,
    description: `${e.description} Sent in chunks of up to 1000 items, at least once (docs/api.md, "Events").`,
    security: [],
    requestBody: {
      required: true,
      content: { 'application/json': { schema: schema(e.schema), example: e.example } },
    },
    responses: {
      '200': {
        description: 'Any 2xx acknowledges the delivery; 410 Gone disables the webhook at once.',
      },
      '500': {
        description: 'Any 5xx, a timeout or a connection error is retried (3 attempts in all).',
      },
    },
  },
})

// Path parameters: numeric ids the service gave, or external ids (any text, percent-encoded).
const PATH_PARAMS: Record<string, { description: string; schema: object }> = {
  id: { description: 'The account id.', schema: { type: 'integer', minimum: 1 } },
  external_id: {
    description: 'The external id, percent-encoded.',
    schema: { type: 'string', maxLength: 255 },
  },
  entity: {
    description: 'customer or contact.',
    schema: { type: 'string', enum: ['customer', 'contact'] },
  },
  codename: { description: "The property's codename.", schema: { type: 'string', maxLength: 63 } },
  contact_id: {
    description: "The contact's external id, percent-encoded.",
    schema: { type: 'string', maxLength: 255 },
  },
}
const pathParam = (name: string) =>
  PATH_PARAMS[name] ?? {
    description: `The ${name.replace('_id', '')} id.`,
    schema: { type: 'integer', minimum: 1 },
  }

const components = (
  schemas: Record<string, JsonSchema>,
  credentialSchemes: Record<string, unknown>,
) => ({
  securitySchemes: {
    serviceKey: {
      type: 'apiKey',
      in: 'header',
      name: 'service-key',
      description:
        'An API key (`sk_...`, from the admin API) with the scope each operation lists. Tracking requests also ' +
        "carry the account's public tracker key in the body (`trackerKey`), as the interface defines.",
    },
    ...credentialSchemes,
    adminToken: {
      type: 'http',
      scheme: 'bearer',
      description: 'The SERVICE_ADMIN_TOKEN the service was started with.',
    },
    sessionCookie: {
      type: 'apiKey',
      in: 'cookie',
      name: 'service_session',
      description:
        'A person signed in (POST /auth/v1/sign-in). The role decides: viewer reads what a `search` key reads, ' +
        'manager also writes what an `upload` key writes, admin also manages the account (`manage`). A request ' +
        "that changes anything also sends the session's `x-csrf-token` header and an Origin of the service's own.",
    },
  },
  schemas,
  headers,
  responses: Object.fromEntries(
    Object.entries(problemResponses).map(([status, r]) => [
      r.name,
      {
        description: r.description,
        ...(r.headers && { headers: headerRefs(r.headers) }),
        content: {
          'application/problem+json': {
            schema: { $ref: '#/components/schemas/ProblemDetails' },
            example: problemExample(Number(status), r.example),
          },
        },
      },
    ]),
  ),
})

const hasBody = (r: Route) => !!r.body || r.method === 'POST' || r.method === 'PUT'
const pathParams = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1])

// Which Problem Details an operation may answer, from what the adapter and the router do: every
// route vets its query string (400), and any but a probe may answer 503 on a connection past the
// caps (or while the database is away).
const errorStatuses = (r: Route) =>
  [
    400,
    ...(r.probe ? [] : [503]),
    ...(hasBody(r) ? [408, 413] : []),
    ...(r.body && !r.jsonOnly ? [415] : []),
    ...(r.auth !== 'none' ? [401] : []),
    ...(typeof r.auth === 'object' ? [403, 429] : r.auth === 'session' ? [403] : []),
    ...(pathParams(r.path).length ? [404] : []),
    ...(r.jsonOnly ? [406] : []),
    ...(r.refusals ?? []),
  ].sort((a, b) => a - b)

// Who may call a route, as OpenAPI says it: a session wherever a role grants what the route needs.
const securityOf = (r: Route) => {
  if (r.auth === 'admin') return [{ adminToken: [] }]
  if (r.auth === 'none') return []
  if (r.auth === 'session') return [{ sessionCookie: [] }]
  const need = r.auth.key
  const session = Object.values(ROLE_GRANTS).some((grants) => allows(grants, need))
    ? [{ sessionCookie: [] }]
    : []
  if (need === 'manage') return session
  if (r.auth.credential)
    return [{ [r.auth.credential.scheme.name]: [] }, ...(r.body ? [] : [{ serviceKey: [need] }])]
  return [{ serviceKey: [need] }, ...session]
}

const operation = (r: Route, schema: (s: v.GenericSchema) => JsonSchema) => {
  // An empty body reads as {} (validate.ts), so a body whose fields are all optional may be left
  // out, unless the route answers only a JSON exchange, which a request without a body is not.
  const bodyRequired = r.body ? !!r.jsonOnly || !v.safeParse(r.body, {}).success : false
  const parameters = [
    ...pathParams(r.path).map((name) => ({ name, in: 'path', required: true, ...pathParam(name) })),
    ...Object.entries(r.query ?? {}).map(([name, q]) => ({
      name,
      in: 'query',
      required: false,
      description: q.description,
      schema: schema(q.schema),
    })),
  ]
  const { status, body, media, example } = r.reply
  return {
    operationId: camel(r.name),
    summary: r.summary,
    tags: [r.tag],
    security: securityOf(r),
    ...(parameters.length && { parameters }),
    ...(r.body && {
      requestBody: {
        required: bodyRequired,
        content: {
          'application/json': {
            schema: schema(r.body),
            ...(r.example !== undefined && { example: r.example }),
          },
        },
      },
    }),
    responses: {
      [status]: {
        description:
          status === 204
            ? 'Done; no content.'
            : status === 302
              ? 'Redirect (Location).'
              : 'Success.',
        ...(typeof r.auth === 'object' && { headers: rateLimitHeaders }),
        ...(body && {
          content: {
            'application/json': { schema: schema(body), ...(example !== undefined && { example }) },
          },
        }),
        ...(media && { content: { [media]: { schema: { type: 'string' } } } }),
      },
      ...Object.fromEntries(
        errorStatuses(r).map((s) => [
          String(s),
          { $ref: `#/components/responses/${problemResponses[s].name}` },
        ]),
      ),
    },
  }
}

const description = `Generated from the service's routing table and the valibot schemas that validate each request
and describe each answer. Every error is RFC 9457 Problem Details (application/problem+json); docs/api.md explains
each status, the limits, paging and the search grammar. A method not listed for a path answers 405 with an Allow
header; a path not listed answers 404.`

// The security schemes of the routes' own credentials (route.ts), each an HTTP Basic scheme.
const credentialSchemes = (routes: Route[]) =>
  Object.fromEntries(
    routes.flatMap((r) => {
      const scheme = typeof r.auth === 'object' ? r.auth.credential?.scheme : undefined
      return scheme
        ? [[scheme.name, { type: 'http', scheme: 'basic', description: scheme.description }]]
        : []
    }),
  )

// A pure function of the routing table: the same rows that build the router build the document.
// `named` schemas become components (Customer, Contact, ...) so that generated clients name them.
export const buildOpenApi = (
  routes: Route[],
  named: Record<string, v.GenericSchema> = {},
  events: PublishedEvent[] = [],
  version = '1.0.0',
) => {
  const convert = converter({ ProblemDetails, ...named })
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, '{$1}')
    ;(paths[path] ??= {})[r.method.toLowerCase()] = operation(r, convert.schema)
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Customer and contact data service',
      version,
      description,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/', description: 'The service that serves this document' }],
    tags: TAGS,
    paths,
    webhooks: Object.fromEntries(events.map((e) => [e.name, eventOperation(e, convert.schema)])),
    components: components(
      convert.components() as Record<string, JsonSchema>,
      credentialSchemes(routes),
    ),
  }
}
