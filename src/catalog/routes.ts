import * as v from 'valibot'
import { ACCOUNTS, accountIn } from '../accounts/accounts.ts'
import type { Entity } from '../property.ts'
import { refuse } from '../errors.ts'
import { noContent, ok, type Req, type Route, route, textParam } from '../route.ts'
import {
  defineProperty,
  deleteProperty,
  listProperties,
  Property,
  PropertyBody,
  RelabelBody,
  relabelProperty,
} from './properties.ts'
import {
  createTag,
  listTags,
  setRecordTags,
  Tag,
  TagBody,
  TagTitles,
  TagTitlesBody,
} from './tags.ts'

// PUT .../customers/{external_id}/tags and .../contacts/{external_id}/tags: one row per entity.
const setTagsRoute = (entity: Entity) =>
  route({
    method: 'PUT',
    path: `${ACCOUNTS}/:id/${entity}s/:external_id/tags`,
    auth: 'admin',
    name: `set-${entity}-tags`,
    summary: `Replace a ${entity}'s tags (by title)`,
    body: TagTitlesBody,
    reply: { status: 200, body: TagTitles },
    handler: async (req, app) =>
      ok(
        await setRecordTags(
          app.sql,
          await accountIn(req, app),
          entity,
          textParam(req, 'external_id'),
          req.input.titles,
        ),
      ),
  })

export const catalogRoutes: Route[] = [
  route({
    method: 'POST',
    path: `${ACCOUNTS}/:id/properties`,
    auth: 'admin',
    name: 'define-property',
    summary: 'Define a property',
    body: PropertyBody,
    refusals: [409],
    reply: { status: 201, body: Property },
    handler: async (req, app) =>
      ok(await defineProperty(app.sql, await accountIn(req, app), req.input), 201),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNTS}/:id/properties`,
    auth: 'admin',
    name: 'list-properties',
    summary: 'List property definitions',
    reply: { status: 200, body: v.array(Property) },
    handler: async (req, app) => ok(await listProperties(app.sql, await accountIn(req, app))),
  }),
  route({
    method: 'GET',
    path: '/api/v1/properties',
    auth: { key: 'search' },
    tag: 'search',
    name: 'account-properties',
    summary:
      "The key's account's property definitions, with their labels: what search can filter by",
    reply: { status: 200, body: v.array(Property) },
    handler: async (req, app) => ok(await listProperties(app.sql, req.auth.accountId)),
  }),
  route({
    method: 'PATCH',
    path: `${ACCOUNTS}/:id/properties/:entity/:codename`,
    auth: 'admin',
    name: 'relabel-property',
    summary: "Set or clear (null) a property's label",
    body: RelabelBody,
    reply: { status: 200, body: Property },
    example: { label: 'Active users' },
    handler: async (req, app) =>
      ok(
        await relabelProperty(
          app.sql,
          await accountIn(req, app),
          entityParam(req),
          textParam(req, 'codename'),
          req.input,
        ),
      ),
  }),
  route({
    method: 'DELETE',
    path: `${ACCOUNTS}/:id/properties/:entity/:codename`,
    auth: 'admin',
    name: 'delete-property',
    summary:
      'Delete a property and its values (refused while the scoring model or a segment uses it)',
    refusals: [409],
    reply: { status: 204 },
    handler: async (req, app) => {
      const id = await accountIn(req, app)
      await deleteProperty(app.sql, id, entityParam(req), textParam(req, 'codename'))
      return noContent
    },
  }),
  route({
    method: 'POST',
    path: `${ACCOUNTS}/:id/tags`,
    auth: 'admin',
    name: 'create-tag',
    summary: 'Create a tag',
    body: TagBody,
    refusals: [409],
    reply: { status: 201, body: Tag },
    handler: async (req, app) =>
      ok(await createTag(app.sql, await accountIn(req, app), req.input), 201),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNTS}/:id/tags`,
    auth: 'admin',
    name: 'list-tags',
    summary: 'List tags',
    reply: { status: 200, body: v.array(Tag) },
    handler: async (req, app) => ok(await listTags(app.sql, await accountIn(req, app))),
  }),
  ...(['customer', 'contact'] as const).map(setTagsRoute),
]

// The entity in a property's path; anything else names nothing.
const entityParam = (req: Req): Entity => {
  const entity = req.params.entity
  return entity === 'customer' || entity === 'contact'
    ? entity
    : refuse(404, 'No such entity: customer or contact.')
}
