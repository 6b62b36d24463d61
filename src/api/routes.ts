import type { Route } from '../http/types.ts'
import { SearchBody } from '../records/search.ts'
import { TrackBody } from '../tracking/schemas.ts'
import { ContactsBody, CustomersBody } from '../uploads/schemas.ts'
import { adminRoutes } from './admin.ts'
import { healthRoutes } from './health.ts'
import { metricsRoute } from './metrics.ts'
import { openApiRoute } from './openapi.ts'
import { recordRoutes } from './records.ts'
import { searchContacts, searchCustomers } from './search.ts'
import { track } from './track.ts'
import { getUpload, uploadContacts, uploadCustomers } from './uploads.ts'

// The whole routing table: the router, the OpenAPI document, the admin CLI and the tests read it.
// Interface endpoints accept only POST; the router answers 405 with Allow for any other method on
// their paths.
export const routes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/customers/search',
    auth: { key: 'search' },
    body: SearchBody,
    summary: 'Search customers',
    handler: searchCustomers,
  },
  {
    method: 'POST',
    path: '/api/v1/contacts/search',
    auth: { key: 'search' },
    body: SearchBody,
    summary: 'Search contacts',
    handler: searchContacts,
  },
  {
    method: 'POST',
    path: '/api/v1/customers',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomersBody,
    refusals: [490],
    summary: 'Upload customers',
    handler: uploadCustomers,
  },
  {
    method: 'POST',
    path: '/api/v1/contacts',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: ContactsBody,
    summary: 'Upload contacts',
    handler: uploadContacts,
  },
  {
    method: 'GET',
    path: '/api/v1/uploads/:upload_id',
    auth: { key: 'upload' },
    summary: 'Read the state of an upload',
    handler: getUpload,
  },
  {
    method: 'POST',
    path: '/api/tracker/track',
    auth: { key: 'track' },
    body: TrackBody,
    summary: 'Track server-side events',
    handler: track,
  },
  ...recordRoutes,
  ...adminRoutes,
  ...healthRoutes,
  metricsRoute,
  openApiRoute(() => routes),
]
