import { accountIn } from '../accounts/accounts.ts'
import { idParam, ok, type Reply, type Route, route, textParam } from '../route.ts'
import { getErasure, requestErasure } from './erasures.ts'
import { exportContact, exportCustomer } from './export.ts'
import { ContactExport, CustomerExport, Erasure, ErasureAccepted, ErasureBody } from './schemas.ts'

const example = {
  contacts: [{ customer_external_id: 'acme-1', contact_external_id: 'pat' }],
  customers: ['globex-7'],
}

// An export's answer is streamed JSON text (http/adapter.ts).
const streamed = (chunks: AsyncIterable<string>): Reply => ({ status: 200, body: chunks })

export const privacyRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/erasures',
    auth: { key: 'erase' },
    body: ErasureBody,
    name: 'request-erasure',
    tag: 'privacy',
    summary:
      'Erase contacts, and customers with all their contacts, everywhere (runs in the background)',
    reply: { status: 202, body: ErasureAccepted },
    example,
    handler: async (req, app) =>
      ok(await requestErasure(app.sql, req.auth.accountId, req.auth.keyId, req.input), 202),
  }),
  route({
    method: 'GET',
    path: '/api/v1/erasures/:erasure_id',
    auth: { key: 'erase' },
    name: 'get-erasure',
    tag: 'privacy',
    summary: "An erasure's status, when it finished, and the rows it removed or redacted per kind",
    reply: { status: 200, body: Erasure },
    handler: async (req, app) =>
      ok(await getErasure(app.sql, req.auth.accountId, idParam(req, 'erasure_id'))),
  }),
  route({
    method: 'POST',
    path: '/admin/v1/accounts/:id/erasures',
    auth: 'admin',
    body: ErasureBody,
    name: 'erase',
    summary: 'Erase contacts and customers of an account everywhere, as POST /api/v1/erasures does',
    reply: { status: 202, body: ErasureAccepted },
    example,
    handler: async (req, app) =>
      ok(await requestErasure(app.sql, await accountIn(req, app), null, req.input), 202),
  }),
  route({
    method: 'GET',
    path: '/admin/v1/accounts/:id/erasures/:erasure_id',
    auth: 'admin',
    name: 'get-erasure-admin',
    summary: "An erasure's status and counts",
    reply: { status: 200, body: Erasure },
    handler: async (req, app) =>
      ok(await getErasure(app.sql, await accountIn(req, app), idParam(req, 'erasure_id'))),
  }),
  route({
    method: 'GET',
    path: '/api/v1/customer/:external_id/contact/:contact_id/export',
    auth: { key: 'search' },
    name: 'export-contact',
    tag: 'privacy',
    summary:
      'Everything held about a contact: the record, scores, snapshots, tags and tracked events',
    reply: { status: 200, body: ContactExport },
    expensive: true,
    handler: async (req, app) =>
      streamed(
        await exportContact(
          app,
          req.auth.accountId,
          textParam(req, 'external_id'),
          textParam(req, 'contact_id'),
          req,
        ),
      ),
  }),
  route({
    method: 'GET',
    path: '/api/v1/customer/:external_id/export',
    auth: { key: 'search' },
    name: 'export-customer',
    tag: 'privacy',
    summary: 'Everything held about a customer and its contacts, streamed',
    reply: { status: 200, body: CustomerExport },
    expensive: true,
    handler: async (req, app) =>
      streamed(await exportCustomer(app, req.auth.accountId, textParam(req, 'external_id'), req)),
  }),
]
