import * as v from 'valibot'
import type { Route } from '../route.ts'
import { accountRoutes } from '../accounts/routes.ts'
import { catalogRoutes } from '../catalog/routes.ts'
import { scoringRoutes } from '../scoring/routes.ts'
import { recordRoutes, searchRoutes } from '../records/routes.ts'
import { segmentRoutes } from '../segments/routes.ts'
import { TrackBody } from '../tracking/schemas.ts'
import { ContactsBody, CustomersBody } from '../uploads/schemas.ts'
import { webhookRoutes } from '../webhooks/routes.ts'
import { adminRoutes } from './admin.ts'
import { consoleRoutes } from './console.ts'
import { docsRoutes } from './docs.ts'
import { healthRoutes } from './health.ts'
import { metricsRoute } from './metrics.ts'
import { openApiRoute } from './openapi.ts'
import { customerEvents, track } from './track.ts'
import { getUpload, listOwnUploads, uploadContacts, uploadCustomers } from './uploads.ts'
import { EventQuery, Events, TrackAccepted, Upload, UploadAccepted, UploadQuery, UploadSummary } from './schemas.ts'

// The whole routing table: the router, the OpenAPI document, the admin CLI and the tests read it.
// Interface endpoints accept only POST; the router answers 405 with Allow for any other method on
// their paths.
export const routes: Route[] = [
  ...searchRoutes,
  {
    method: 'POST',
    path: '/api/v1/customers',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomersBody,
    refusals: [490],
    name: 'upload-customers',
    tag: 'uploads',
    summary: 'Upload customers',
    reply: { status: 200, body: UploadAccepted, example: { upload_id: 17, status: 'received', items: 1 } },
    example: {
      customers: [
        {
          external_id: 'acme-1',
          name: 'Acme Inc.',
          owner_email: 'owner@example.com',
          attributes: { country: 'US' },
          metrics: [{ date: '2026-11-01', logins: 42 }],
        },
      ],
    },
    handler: uploadCustomers,
  },
  {
    method: 'POST',
    path: '/api/v1/contacts',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: ContactsBody,
    name: 'upload-contacts',
    tag: 'uploads',
    summary: 'Upload contacts',
    reply: { status: 200, body: UploadAccepted },
    example: {
      contacts: [{ contact_external_id: 'pat', contact_name: 'Pat Doe', customer_external_id: 'acme-1' }],
    },
    handler: uploadContacts,
  },
  {
    method: 'GET',
    path: '/api/v1/uploads/:upload_id',
    auth: { key: 'upload' },
    name: 'get-upload',
    tag: 'uploads',
    summary: 'Read the state of an upload',
    reply: { status: 200, body: Upload },
    handler: getUpload,
  },
  {
    method: 'GET',
    path: '/api/v1/uploads',
    auth: { key: 'upload' },
    query: UploadQuery,
    name: 'list-own-uploads',
    tag: 'uploads',
    summary: "The key's account's uploads, newest first, 500 at most (?status=, ?stuck=true)",
    reply: { status: 200, body: v.array(UploadSummary) },
    handler: listOwnUploads,
  },
  {
    method: 'GET',
    path: '/api/v1/customer/:external_id/events',
    auth: { key: 'search' },
    query: { limit: EventQuery.limit },
    name: 'customer-events',
    tag: 'tracking',
    summary: 'The latest events tracked for a customer, newest first, with counts by state (?limit=)',
    reply: { status: 200, body: Events },
    handler: customerEvents,
  },
  {
    method: 'POST',
    path: '/api/tracker/track',
    auth: { key: 'track' },
    body: TrackBody,
    name: 'track',
    tag: 'tracking',
    summary: 'Track server-side events',
    reply: { status: 200, body: TrackAccepted },
    example: {
      trackerKey: 'CS-7Q2KD9XZ',
      events: [
        {
          name: 'report.exported',
          timestamp: 1795000000000,
          identification: { customer: 'acme-1', contact: 'pat' },
          data: { customer: { plan: 'pro' } },
        },
      ],
    },
    handler: track,
  },
  ...segmentRoutes,
  ...recordRoutes,
  ...accountRoutes,
  ...catalogRoutes,
  ...adminRoutes,
  ...scoringRoutes,
  ...webhookRoutes,
  ...healthRoutes,
  metricsRoute,
  ...docsRoutes,
  ...consoleRoutes,
  openApiRoute(() => routes),
]
