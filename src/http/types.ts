import type { IncomingHttpHeaders } from 'node:http'
import type { GenericSchema, InferOutput } from 'valibot'
import type { App } from '../context.ts'

// A lean request view: what the handlers read, without building a web Request per call.
export interface Req {
  id: string
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: Buffer
  params: Record<string, string>
  query: Record<string, string | string[] | undefined>
  route?: string
  auth?: { accountId: number; keyId: number }
  // The body as JSON.parse read it, and the route's schema's output of it.
  json?: unknown
  input?: unknown
  // The route's declared query parameters, parsed by their schemas before the handler runs.
  queryInput?: Record<string, unknown>
  replyHeaders?: Record<string, string>
  // Aborted when the client goes before its answer is sent: work on its behalf stops with it.
  signal?: AbortSignal
  // Time spent waiting for the account's turn at an expensive route (router.ts), for its budget.
  waitedMs?: number
}

export interface Reply {
  status: number
  headers?: Record<string, string>
  body?: unknown
}

export type Handler = (req: Req, app: App) => Promise<Reply> | Reply

export type Auth = 'none' | 'admin' | { key: 'search' | 'upload' | 'track' }

export type Tag = 'search' | 'segments' | 'uploads' | 'records' | 'tracking' | 'admin' | 'operations' | 'events'

// The success answer as OpenAPI publishes it and the contract test checks it: a JSON body of this
// schema (none for 204), or text of another media type.
export interface Success {
  status: 200 | 201 | 202 | 204
  body?: GenericSchema
  media?: string
  example?: unknown
}

// A query parameter the handler reads, parsed by its schema (a number from its decimal text); its
// default, if any, is the schema's (v.optional(schema, default)).
export interface QueryParam {
  description: string
  schema: GenericSchema
}

// What a handler finds in req.queryInput for a route's declared parameters.
export type QueryOf<Q extends Record<string, QueryParam>> = { [K in keyof Q]: InferOutput<Q[K]['schema']> }

// One row of the routing table; the same rows build the router and the OpenAPI document.
export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  path: string
  auth: Auth
  summary: string
  // Validated into req.input before the handler runs; also documents the route in OpenAPI.
  body?: GenericSchema
  // 406 unless the request is JSON and accepts JSON (uploads and single-record writes).
  jsonOnly?: boolean
  // The operation's name: camelCased, its OpenAPI operationId; for admin operations, the CLI's
  // command (`service admin <name>`).
  name: string
  tag: Tag
  reply: Success
  query?: Record<string, QueryParam>
  // An example request body, for OpenAPI.
  example?: unknown
  // Refusals the handler may answer beyond those of its auth and body (e.g. 409, 490), for OpenAPI.
  refusals?: number[]
  // Its cost grows with the account's data (searches, aggregates): an account runs at most
  // SERVICE_EXPENSIVE_PER_ACCOUNT of these at once per process, and past that gets a 429. For routes
  // taking a service key, whose account it counts against.
  // A liveness or readiness probe: answered even on a connection past the caps (http/connections.ts).
  probe?: true
  expensive?: true
  handler: Handler
}
