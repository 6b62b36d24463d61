import { refuse } from '../errors.ts'
import { textParam } from '../route.ts'
import type { Req, Route } from '../route.ts'
import { readRecord, scoreExplanation } from '../records/read.ts'
import {
  ContactCreate,
  ContactPatch,
  createRecord,
  CustomerCreate,
  CustomerPatch,
  deleteContact,
  deleteCustomer,
  updateContact,
  updateCustomer,
} from '../records/write.ts'
import type { ContactItem, CustomerItem } from '../uploads/schemas.ts'
import { Contact, Customer, CustomerWithExplanation } from './schemas.ts'

const param = textParam

const account = (req: Req) => req.auth!.accountId

const customerRoutes = (prefix: string): Omit<Route, 'tag'>[] => [
  {
    method: 'POST',
    path: `${prefix}/customer`,
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomerCreate,
    refusals: [409, 490],
    name: 'create-customer',
    summary: 'Create one customer (processed before the answer)',
    reply: { status: 201, body: Customer },
    handler: async (req, app) => {
      const item = req.input as CustomerItem
      await createRecord(app, account(req), 'customers', item)
      return { status: 201, body: await readRecord(app, account(req), 'customer', item.external_id) }
    },
  },
  {
    method: 'GET',
    path: `${prefix}/customer/:external_id`,
    auth: { key: 'search' },
    name: 'get-customer',
    summary: 'Read one customer',
    reply: { status: 200, body: CustomerWithExplanation },
    handler: async (req, app) => ({
      status: 200,
      body: {
        ...(await readRecord(app, account(req), 'customer', param(req, 'external_id'))),
        score_explanation: await scoreExplanation(app, account(req), param(req, 'external_id')),
      },
    }),
  },
  {
    method: 'PUT',
    path: `${prefix}/customer/:external_id`,
    auth: { key: 'upload' },
    jsonOnly: true,
    body: CustomerPatch,
    name: 'update-customer',
    summary: 'Update one customer (name, owner, attributes, churn state)',
    reply: { status: 200, body: Customer },
    handler: async (req, app) => {
      await updateCustomer(app, account(req), param(req, 'external_id'), req.input)
      return { status: 200, body: await readRecord(app, account(req), 'customer', param(req, 'external_id')) }
    },
  },
  {
    method: 'DELETE',
    path: `${prefix}/customer/:external_id`,
    auth: { key: 'upload' },
    name: 'delete-customer',
    // The account's records are owned by another source of truth.
    refusals: [406],
    summary: 'Delete one customer and its contacts',
    reply: { status: 204 },
    handler: async (req, app) => (await deleteCustomer(app, account(req), param(req, 'external_id')), { status: 204 }),
  },
  {
    method: 'POST',
    path: `${prefix}/customer/:external_id/contact`,
    auth: { key: 'upload' },
    jsonOnly: true,
    body: ContactCreate,
    refusals: [409],
    name: 'create-contact',
    summary: 'Create one contact of a customer',
    reply: { status: 201, body: Contact },
    handler: async (req, app) => {
      const customer = param(req, 'external_id')
      const item = { ...(req.input as Omit<ContactItem, 'customer_external_id'>), customer_external_id: customer }
      const [found] =
        await app.sql`select 1 from customers where account_id = ${account(req)} and external_id = ${customer}`
      if (!found) refuse(404, `Customer ${customer} does not exist.`)
      await createRecord(app, account(req), 'contacts', item)
      return { status: 201, body: await readRecord(app, account(req), 'contact', item.contact_external_id, customer) }
    },
  },
  {
    method: 'GET',
    path: `${prefix}/customer/:external_id/contact/:contact_id`,
    auth: { key: 'search' },
    name: 'get-contact',
    summary: 'Read one contact',
    reply: { status: 200, body: Contact },
    handler: async (req, app) => ({
      status: 200,
      body: await readRecord(app, account(req), 'contact', param(req, 'contact_id'), param(req, 'external_id')),
    }),
  },
  {
    method: 'PUT',
    path: `${prefix}/customer/:external_id/contact/:contact_id`,
    auth: { key: 'upload' },
    jsonOnly: true,
    body: ContactPatch,
    name: 'update-contact',
    summary: 'Update one contact (name, attributes)',
    reply: { status: 200, body: Contact },
    handler: async (req, app) => {
      await updateContact(app, account(req), param(req, 'external_id'), param(req, 'contact_id'), req.input)
      return {
        status: 200,
        body: await readRecord(app, account(req), 'contact', param(req, 'contact_id'), param(req, 'external_id')),
      }
    },
  },
  {
    method: 'DELETE',
    path: `${prefix}/customer/:external_id/contact/:contact_id`,
    auth: { key: 'upload' },
    name: 'delete-contact',
    // The account's records are owned by another source of truth.
    refusals: [406],
    summary: 'Delete one contact',
    reply: { status: 204 },
    handler: async (req, app) => (
      await deleteContact(app, account(req), param(req, 'external_id'), param(req, 'contact_id')), { status: 204 }
    ),
  },
]

// The webhook payload names the routes without the /api prefix; both answer, the shorter path as
// an alias of the same operation.
export const recordRoutes: Route[] = [
  ...customerRoutes('/api/v1').map((r): Route => ({ ...r, tag: 'records' })),
  ...customerRoutes('/v1').map(
    (r): Route => ({
      ...r,
      tag: 'records',
      name: `${r.name}-alias`,
      summary: `${r.summary}; the path the webhook payload names`,
    }),
  ),
]
