import * as v from 'valibot'
import { accountIn } from '../accounts/accounts.ts'
import { idParam, ok, type Route, route } from '../route.ts'
import { cancelUpload, getUpload, listAccountUploads, retryUpload } from './manage.ts'
import { receiveUpload } from './receive.ts'
import {
  ContactsBody,
  CustomersBody,
  Upload,
  UploadAccepted,
  UploadAction,
  UploadQuery,
  UploadSummary,
} from './schemas.ts'

const ACCOUNT = '/admin/v1/accounts'

export const uploadRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/customers',
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomersBody,
    refusals: [490],
    name: 'upload-customers',
    tag: 'uploads',
    summary: 'Upload customers',
    reply: {
      status: 200,
      body: UploadAccepted,
      example: { upload_id: 17, status: 'received', items: 1 },
    },
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
    handler: async (req, app) =>
      ok(await receiveUpload(app, req.auth.accountId, 'customers', req.input.customers)),
  }),
  route({
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
      contacts: [
        { contact_external_id: 'pat', contact_name: 'Pat Doe', customer_external_id: 'acme-1' },
      ],
    },
    handler: async (req, app) =>
      ok(await receiveUpload(app, req.auth.accountId, 'contacts', req.input.contacts)),
  }),
  route({
    method: 'GET',
    path: '/api/v1/uploads/:upload_id',
    auth: { key: 'upload' },
    name: 'get-upload',
    tag: 'uploads',
    summary: 'Read the state of an upload',
    reply: { status: 200, body: Upload },
    handler: async (req, app) =>
      ok(await getUpload(app.sql, req.auth.accountId, idParam(req, 'upload_id'))),
  }),
  // The key's own uploads: what the admin list shows, for the account of the key.
  route({
    method: 'GET',
    path: '/api/v1/uploads',
    auth: { key: 'upload' },
    query: UploadQuery,
    name: 'list-own-uploads',
    tag: 'uploads',
    summary: "The key's account's uploads, newest first, 500 at most (?status=, ?stuck=true)",
    reply: { status: 200, body: v.array(UploadSummary) },
    handler: async (req, app) =>
      ok(
        await listAccountUploads(
          app.sql,
          req.auth.accountId,
          req.queryInput,
          app.config.stuckUploadSeconds,
        ),
      ),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNT}/:id/uploads`,
    auth: 'admin',
    name: 'list-uploads',
    reply: { status: 200, body: v.array(UploadSummary) },
    query: UploadQuery,
    summary: "List an account's uploads, newest first (?status=, ?stuck=true)",
    handler: async (req, app) =>
      ok(
        await listAccountUploads(
          app.sql,
          await accountIn(req, app),
          req.queryInput,
          app.config.stuckUploadSeconds,
        ),
      ),
  }),
  route({
    method: 'POST',
    path: `${ACCOUNT}/:id/uploads/:upload_id/retry`,
    auth: 'admin',
    name: 'retry-upload',
    reply: { status: 202, body: UploadAction },
    summary: 'Process a failed or stuck upload again',
    refusals: [409],
    handler: async (req, app) =>
      ok(
        await retryUpload(
          app.sql,
          await accountIn(req, app),
          idParam(req, 'upload_id'),
          app.config.stuckUploadSeconds,
        ),
        202,
      ),
  }),
  route({
    method: 'POST',
    path: `${ACCOUNT}/:id/uploads/:upload_id/cancel`,
    auth: 'admin',
    name: 'cancel-upload',
    reply: { status: 200, body: UploadAction },
    summary: 'Fail an upload that is not processed yet (it can be retried later)',
    refusals: [409],
    handler: async (req, app) =>
      ok(
        await cancelUpload(
          app.sql,
          await accountIn(req, app),
          idParam(req, 'upload_id'),
          app.config.stuckUploadSeconds,
        ),
      ),
  }),
]
