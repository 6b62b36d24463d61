import type { Route } from '../route.ts'
import { AggregateBody } from '../records/aggregate.ts'
import { SearchBody } from '../records/search.ts'
import { trackingRoutes } from '../tracking/routes.ts'
import { notificationRoutes } from '../notifications/routes.ts'
import { uploadRoutes } from '../uploads/routes.ts'
import { adminRoutes } from './admin.ts'
import { consoleRoutes } from './console.ts'
import { docsRoutes } from './docs.ts'
import { healthRoutes } from './health.ts'
import { metricsRoute } from './metrics.ts'
import { openApiRoute } from './openapi.ts'
import { recordRoutes } from './records.ts'
import { aggregateCustomers, searchContacts, searchCustomers } from './search.ts'
import { segmentRoutes } from './segments.ts'
import { ContactPage, CustomerAggregate, CustomerPage } from './schemas.ts'

// The whole routing table: the router, the OpenAPI document, the admin CLI and the tests read it.
// Interface endpoints accept only POST; the router answers 405 with Allow for any other method on
// their paths.
export const routes: Route[] = [
  {
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
    handler: searchCustomers,
  },
  {
    method: 'POST',
    path: '/api/v1/contacts/search',
    auth: { key: 'search' },
    body: SearchBody,
    refusals: [422],
    name: 'search-contacts',
    tag: 'search',
    summary: 'Search contacts',
    reply: { status: 200, body: ContactPage },
    example: { filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'acme-1' }] },
    expensive: true,
    handler: searchContacts,
  },
  {
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
    handler: aggregateCustomers,
  },
  ...uploadRoutes,
  ...trackingRoutes,
  ...segmentRoutes,
  ...recordRoutes,
  ...adminRoutes,
  ...notificationRoutes,
  ...healthRoutes,
  metricsRoute,
  ...docsRoutes,
  ...consoleRoutes,
  openApiRoute(() => routes),
]
