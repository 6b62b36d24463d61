import type { IncomingHttpHeaders } from 'node:http'
import type { GenericSchema, InferOutput } from 'valibot'
import type { App } from './context.ts'
import type { Scope } from './db/key-check.ts'
import { refuse } from './errors.ts'
import { UNSTORABLE } from './validate.ts'

// What a route row is and what its handler receives. Modules write their rows with route(); the
// router (http/) runs them, the OpenAPI document and the admin CLI read them.

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
  auth?: KeyHolder
  // The client's address as the socket has it (no proxy header is trusted); none from the CLI.
  address?: string
  // Who makes the request, once its auth has passed (http/auth.ts): the audit log's "who".
  actor?: Actor
  // The signed-in person, when a session cookie authenticated the request.
  session?: Session
  // The body as JSON.parse read it, and the route's schema's output of it.
  json?: unknown
  input?: unknown
  // The route's declared query parameters, parsed by their schemas before the handler runs.
  queryInput?: Record<string, unknown>
  replyHeaders?: Record<string, string>
  // Aborted when the client goes before its answer is sent: work on its behalf stops with it.
  signal?: AbortSignal
  // Time spent waiting for the account's turn at an expensive route (http/router.ts),
  // for its budget.
  waitedMs?: number
}

// The account a request acts in, and its key (null when a person's session authenticated it).
interface KeyHolder {
  accountId: number
  keyId: number | null
}

// The operator is the admin token's holder (or the `service admin` command), with no id of its own.
export interface Actor {
  type: 'user' | 'key' | 'operator'
  id: number | null
  name: string | null
}
export const OPERATOR: Actor = { type: 'operator', id: null, name: 'operator' }

// What a route row may need: a key scope, or `manage` (the account's users, keys, SSO ...), which
// no key holds and only an admin's session has.
export type Grant = Scope | 'manage'

// A person's role, in the grants of the key scopes: one rule (http/auth.ts) decides for a key, by
// its scopes, and for a session, by these. No role reaches tracking intake or erasures.
export const ROLES = ['viewer', 'manager', 'admin'] as const
export type Role = (typeof ROLES)[number]
export const ROLE_GRANTS: Record<Role, readonly Grant[]> = {
  viewer: ['search'],
  manager: ['search', 'upload'],
  admin: ['search', 'upload', 'manage', 'audit'],
}

// The one authorization rule: what a key's scopes or a role's grants hold covers the route's need.
export const allows = (held: readonly string[], need: Grant) => held.includes(need)

export interface Session {
  id: number
  accountId: number
  userId: number
  email: string
  name: string | null
  role: Role
  csrfToken: string
}

export interface Reply {
  status: number
  headers?: Record<string, string>
  body?: unknown
}

// `credential`: where the key comes instead of the service-key header. 'basic-user-or-body-field':
// as the HTTP Basic user name (empty password) or as the JSON body's string `field`; both given,
// they must name the same key. A route without a body takes the Basic user or the service-key
// header. `scheme` is the credential's OpenAPI security scheme (http/openapi.ts), by its name.
// `session`: any signed-in person of the account, whatever the role (sign-out, who am I).
export interface Credential {
  source: 'basic-user-or-body-field'
  field: string
  scheme: { name: string; description: string }
}
export type KeyAuth = { key: Grant; credential?: Credential }
export type Auth = 'none' | 'admin' | 'session' | KeyAuth

// The OpenAPI document's tags, in its order: a route row names one (an admin row gets `admin`).
export const TAGS = [
  {
    name: 'search',
    description: 'Find customers and contacts by filters on any field, with paging.',
  },
  {
    name: 'segments',
    description: 'Saved customer searches, their members, and who entered and left them when.',
  },
  {
    name: 'insights',
    description:
      'Reports over an account: "This week", what moved, the renewals ahead and 12 weeks of health.',
  },
  {
    name: 'uploads',
    description: 'Send customers and contacts in batches; they are processed in the background.',
  },
  {
    name: 'records',
    description: 'Create, read, update and delete one customer or contact at a time.',
  },
  {
    name: 'tracking',
    description: 'Server-side events that keep tracked attributes and metrics current.',
  },
  {
    name: 'admin',
    description: 'Accounts, keys, users, properties, tags, scoring, webhooks and support tools.',
  },
  { name: 'operations', description: 'Health, readiness, metrics and this document.' },
  {
    name: 'privacy',
    description:
      'Erasure requests, suppressions of erased people, and exports of what is held about a person.',
  },
  {
    name: 'people',
    description:
      "People sign in with email and password; an account's admins invite them and remove them.",
  },
  { name: 'audit', description: 'Who changed what, on what, when and from where: the audit log.' },
  {
    name: 'events',
    description:
      'What the service sends to webhook subscribers: signed POSTs (X-service-HMAC, Standard Webhooks headers).',
  },
] as const satisfies readonly { name: string; description: string }[]
export type Tag = (typeof TAGS)[number]['name']

// The success answer as OpenAPI publishes it and the contract test checks it: a JSON body of this
// schema (none for 204), or text of another media type.
export interface Success {
  status: 200 | 201 | 202 | 204 | 302
  body?: GenericSchema
  media?: string
  example?: unknown
}

// A query parameter the handler reads, parsed by its schema (a number from its decimal text); its
// default, if any, is the schema's (v.optional(schema, default)).
interface QueryParam {
  description: string
  schema: GenericSchema
}
export type Query = Record<string, QueryParam>

// What a handler finds in req.queryInput for a route's declared parameters: every parameter may be
// left out, so one whose schema is not v.optional (with its default) may be undefined.
type QueryOf<Q extends Query> = {
  [K in keyof Q]: Q[K]['schema'] extends { type: 'optional' }
    ? InferOutput<Q[K]['schema']>
    : InferOutput<Q[K]['schema']> | undefined
}

// The request as a route's handler sees it: its body and query parsed by the row's schemas, and the
// key's holder when the row takes a service key.
interface Input<B, Q, A> extends Req {
  input: B extends GenericSchema ? InferOutput<B> : undefined
  queryInput: Q extends Query ? QueryOf<Q> : undefined
  auth: A extends KeyAuth | 'session' ? KeyHolder : undefined
  session: A extends 'session' ? Session : Session | undefined
}

interface Row<A extends Auth, B, Q> {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  path: string
  // Who may call it: anyone, the operator's admin token, a signed-in person, or a service key of
  // this scope (or a session whose role grants it).
  auth: A
  summary: string
  // Validated into req.input before the handler runs; also documents the route in OpenAPI.
  body?: B
  query?: Q
  // 406 unless the request is JSON and accepts JSON (uploads and single-record writes).
  jsonOnly?: boolean
  // The operation's name: its OpenAPI operationId (camelCased) and, for admin routes, the CLI's
  // command (`service admin <name>`).
  name: string
  tag: Tag
  reply: Success
  // An example request body, for OpenAPI.
  example?: unknown
  // Refusals the handler may answer beyond those of its auth and body (e.g. 409, 490), for OpenAPI.
  refusals?: number[]
  // Its cost grows with the account's data (searches, aggregates): an account runs at most
  // SERVICE_EXPENSIVE_PER_ACCOUNT of these at once per process, and past that gets a 429.
  expensive?: true
  // A liveness or readiness probe: answered even on a connection past the caps
  // (http/connections.ts).
  probe?: true
  // A row of a method but GET that the audit log leaves out (http/audit.ts): a read sent by POST
  // (a search, a preview), or event intake, whose events are their own record and whose volume
  // would bury the changes people make. Every other such row is audited.
  unaudited?: 'read' | 'intake'
}

// One row of the routing table, its input types erased: what the router and OpenAPI read.
export interface Route extends Row<Auth, GenericSchema, Query> {
  // A method, so that a row whose handler takes a narrower Input is still a Route.
  handler(req: Req, app: App): Reply | Promise<Reply>
}

// An admin row's tag is its audience: every route of the admin token is published under `admin`,
// so its rows leave the tag out; every other row names its own.
type Tagged<A extends Auth> = A extends 'admin' ? { tag?: never } : { tag: Tag }

type TypedRoute<
  A extends Auth,
  B extends GenericSchema | undefined,
  Q extends Query | undefined,
> = Omit<Row<A, B, Q>, 'tag'> &
  Tagged<A> & {
    handler(req: Input<B, Q, A>, app: App): Reply | Promise<Reply>
  }

// A route row whose handler is typed by the row's own auth, body and query schemas, as Hono's
// validator types c.req.valid(): the handler never casts what the router has checked.
export const route = <
  A extends Auth,
  B extends GenericSchema | undefined = undefined,
  Q extends Query | undefined = undefined,
>(
  row: TypedRoute<A, B, Q>,
): Route => ({ ...row, tag: row.tag ?? 'admin' })

export const ok = (body: unknown, status = 200): Reply => ({ status, body })
export const noContent: Reply = { status: 204 }

// A text that PostgreSQL can store and a client can have meant, or nothing. In a query string
// (form encoding) + is a space; in a path it is itself.
export const decoded = (raw: string, max: number, form = false) => {
  try {
    const text = decodeURIComponent(form ? raw.replace(/\+/g, ' ') : raw)
    return text.length <= max && !UNSTORABLE.test(text) ? text : undefined
  } catch {
    return undefined
  }
}

// External ids may hold any character, so they arrive percent-encoded. A malformed escape, a
// character PostgreSQL cannot store or more than 255 characters name no record.
export const textParam = (req: Req, name: string) =>
  decoded(req.params[name], 255) ?? refuse(404, `No record with that ${name}.`)

// A numeric id in the path; anything else names nothing (404).
export const idParam = (req: Req, name: string) => {
  const n = Number(req.params[name])
  return Number.isSafeInteger(n) && n > 0
    ? n
    : refuse(404, `No such ${name.replace('_id', '').replace(/^id$/, 'account')}.`)
}
