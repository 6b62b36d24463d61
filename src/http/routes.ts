import { adminRoutes } from '../api/admin.ts'
import { healthRoutes } from '../api/health.ts'
import { metricsRoute } from '../api/metrics.ts'
import { openApiRoute } from '../api/openapi.ts'
import { recordRoutes } from '../api/records.ts'
import { SearchBody, searchContacts, searchCustomers } from '../api/search.ts'
import { getUpload, uploadContacts, uploadCustomers } from '../api/uploads.ts'
import { track } from '../api/track.ts'
import { ContactsBody, CustomersBody } from '../uploads/schemas.ts'
import { TrackBody } from '../tracking/schemas.ts'
import type { Route } from './types.ts'

// The whole routing table. Interface endpoints accept only POST; the router answers 405 with
// Allow for any other method on their paths.
export const routes: Route[] = [
  { method: 'POST', path: '/api/v1/customers/search', auth: { key: 'search' }, body: SearchBody, summary: 'Search customers', handler: searchCustomers },
  { method: 'POST', path: '/api/v1/contacts/search', auth: { key: 'search' }, body: SearchBody, summary: 'Search contacts', handler: searchContacts },
  { method: 'POST', path: '/api/v1/customers', auth: { key: 'upload' }, jsonOnly: true, body: CustomersBody, summary: 'Upload customers', handler: uploadCustomers },
  { method: 'POST', path: '/api/v1/contacts', auth: { key: 'upload' }, jsonOnly: true, body: ContactsBody, summary: 'Upload contacts', handler: uploadContacts },
  { method: 'GET', path: '/api/v1/uploads/:upload_id', auth: { key: 'upload' }, summary: 'Read the state of an upload', handler: getUpload },
  { method: 'POST', path: '/api/tracker/track', auth: { key: 'track' }, body: TrackBody, summary: 'Track server-side events', handler: track },
  ...recordRoutes,
  ...adminRoutes,
  ...healthRoutes,
  metricsRoute,
  openApiRoute(() => routes),
]
