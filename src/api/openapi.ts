import * as v from 'valibot'
import { buildOpenApi } from '../http/openapi.ts'
import { route, type Route } from '../route.ts'
import { listEventTypes, PAYLOADS } from '../webhooks/events.ts'
import { NAMED } from './schemas.ts'

const events = () => listEventTypes().map((e) => ({ ...e, schema: PAYLOADS[e.name] }))

// The document GET /openapi.json serves; `npm run openapi-types` builds it in-process too.
export const openApiDocument = (table: Route[]) => buildOpenApi(table, NAMED, events())

// The routing table never changes at run time, so the document is built and serialized once,
// on first request (the table is passed lazily: this row is part of it).
export const openApiRoute = (table: () => Route[]): Route => {
  let json: string | undefined
  return route({
    method: 'GET',
    path: '/openapi.json',
    auth: 'none',
    name: 'get-openapi',
    tag: 'operations',
    reply: { status: 200, body: v.record(v.string(), v.unknown()) },
    summary: 'This API as an OpenAPI 3.1 document',
    handler: () => ({
      status: 200,
      headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=3600' },
      body: (json ??= JSON.stringify(openApiDocument(table()))),
    }),
  })
}
