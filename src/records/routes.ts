import { noContent, ok, type Reply, type Req, type Route, route, textParam } from '../route.ts'
import { AggregateBody, aggregate } from './aggregate.ts'
import { readExplainedCustomer, readRecord } from './read.ts'
import {
  Contact,
  ContactPage,
  Customer,
  CustomerAggregate,
  CustomerPage,
  CustomerWithExplanation,
} from './schemas.ts'
import { SearchBody } from './search-body.ts'
import { searchPage } from './search.ts'
import {
  ContactCreate,
  ContactPatch,
  createContact,
  createCustomer,
  CustomerCreate,
  CustomerPatch,
  deleteContact,
  deleteCustomer,
  updateContact,
  updateCustomer,
} from './write.ts'

// Searches and aggregates: interface endpoints, POST only (the router answers 405 with Allow for
// any other method on their paths).
export const searchRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/customers/search',
    auth: { key: 'search' },
    body: SearchBody,
    refusals: [422],
    name: 'search-customers',
    tag: 'search',
    summary: 'Search customers',
    reply: { status: 200, body: CustomerPage },
    example: {
      filters: [{ propertyName: 'churn_risk', operator: 'GTE', value: '70' }],
      properties: ['country'],
      limit: 50,
    },
    expensive: true,
    unaudited: 'read',
    handler: async (req, app) =>
      searched(await searchPage(app, req.auth.accountId, 'customer', req.input, req)),
  }),
  route({
    method: 'POST',
    path: '/api/v1/contacts/search',
    auth: { key: 'search' },
    body: SearchBody,
    refusals: [422],
    name: 'search-contacts',
    tag: 'search',
    summary: 'Search contacts',
    reply: { status: 200, body: ContactPage },
    example: {
      filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'acme-1' }],
    },
    expensive: true,
    unaudited: 'read',
    handler: async (req, app) =>
      searched(await searchPage(app, req.auth.accountId, 'contact', req.input, req)),
  }),
  route({
    method: 'POST',
    path: '/api/v1/customers/aggregate',
    auth: { key: 'search' },
    body: AggregateBody,
    refusals: [422],
    name: 'aggregate-customers',
    tag: 'search',
    summary: 'Aggregate the customers a search matches',
    reply: { status: 200, body: CustomerAggregate },
    example: {
      where: {
        or: [
          { propertyName: 'churn_risk', operator: 'GTE', value: '70' },
          { propertyName: 'owner', operator: 'UNKNOWN' },
        ],
      },
      fields: ['upsell_score', 'logins'],
      buckets: 10,
      matrix: 'points',
      points: 5000,
    },
    expensive: true,
    unaudited: 'read',
    handler: async (req, app) => ok(await aggregate(app, req.auth.accountId, req.input, req)),
  }),
]

const external = (req: Req) => textParam(req, 'external_id')
const contactId = (req: Req) => textParam(req, 'contact_id')

// One record at a time, under /api/v1 and (aliases below) under /v1.
const singleRecordRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/customer',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomerCreate,
    refusals: [409, 490],
    name: 'create-customer',
    tag: 'records',
    summary: 'Create one customer (processed before the answer)',
    reply: { status: 201, body: Customer },
    handler: async (req, app) => ok(await createCustomer(app, req.auth.accountId, req.input), 201),
  }),
  route({
    method: 'GET',
    path: '/api/v1/customer/:external_id',
    auth: { key: 'search' },
    name: 'get-customer',
    tag: 'records',
    summary: 'Read one customer',
    reply: { status: 200, body: CustomerWithExplanation },
    handler: async (req, app) =>
      ok(await readExplainedCustomer(app, req.auth.accountId, external(req))),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/customer/:external_id',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomerPatch,
    name: 'update-customer',
    tag: 'records',
    summary: 'Update one customer (name, owner, attributes, churn state)',
    reply: { status: 200, body: Customer },
    handler: async (req, app) =>
      ok(await updateCustomer(app, req.auth.accountId, external(req), req.input)),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/customer/:external_id',
    auth: { key: 'upload' },
    name: 'delete-customer',
    tag: 'records',
    // The account's records are owned by another source of truth.
    refusals: [406],
    summary: 'Delete one customer and its contacts',
    reply: { status: 204 },
    handler: async (req, app) => (
      await deleteCustomer(app, req.auth.accountId, external(req)), noContent
    ),
  }),
  route({
    method: 'POST',
    path: '/api/v1/customer/:external_id/contact',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: ContactCreate,
    refusals: [409],
    name: 'create-contact',
    tag: 'records',
    summary: 'Create one contact of a customer',
    reply: { status: 201, body: Contact },
    handler: async (req, app) =>
      ok(await createContact(app, req.auth.accountId, external(req), req.input), 201),
  }),
  route({
    method: 'GET',
    path: '/api/v1/customer/:external_id/contact/:contact_id',
    auth: { key: 'search' },
    name: 'get-contact',
    tag: 'records',
    summary: 'Read one contact',
    reply: { status: 200, body: Contact },
    handler: async (req, app) =>
      ok(await readRecord(app, req.auth.accountId, 'contact', contactId(req), external(req))),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/customer/:external_id/contact/:contact_id',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: ContactPatch,
    name: 'update-contact',
    tag: 'records',
    summary: 'Update one contact (name, attributes)',
    reply: { status: 200, body: Contact },
    handler: async (req, app) =>
      ok(await updateContact(app, req.auth.accountId, external(req), contactId(req), req.input)),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/customer/:external_id/contact/:contact_id',
    auth: { key: 'upload' },
    name: 'delete-contact',
    tag: 'records',
    // The account's records are owned by another source of truth.
    refusals: [406],
    summary: 'Delete one contact',
    reply: { status: 204 },
    handler: async (req, app) => (
      await deleteContact(app, req.auth.accountId, external(req), contactId(req)), noContent
    ),
  }),
]

// The webhook payload names the routes without the /api prefix; both answer, the shorter path as
// an alias of the same operation.
const aliases = (rows: Route[]): Route[] =>
  rows.map((r) => ({
    ...r,
    path: r.path.replace(/^\/api\/v1\//, '/v1/'),
    name: `${r.name}-alias`,
    summary: `${r.summary}; the path the webhook payload names`,
  }))

export const recordRoutes: Route[] = [...singleRecordRoutes, ...aliases(singleRecordRoutes)]

// A page is the bytes Postgres rendered (records/search.ts), sent as they are.
const searched = (page: Buffer): Reply => ({
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: page,
})
