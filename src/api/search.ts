import type { Entity } from '../catalog.ts'
import type { Handler } from '../route.ts'
import { type AggregateBody, aggregate } from '../records/aggregate.ts'
import { type SearchBody, searchPage } from '../records/search.ts'

const search =
  (entity: Entity): Handler =>
  async (req, app) => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: await searchPage(app, req.auth!.accountId, entity, req.input as SearchBody, req),
  })

export const searchCustomers = search('customer')
export const searchContacts = search('contact')

export const aggregateCustomers: Handler = async (req, app) => ({
  status: 200,
  body: await aggregate(app, req.auth!.accountId, req.input as AggregateBody, req),
})
