import * as v from 'valibot'
import { idParam, noContent, ok, type Req, type Route, route } from '../route.ts'
import { CustomerPage } from '../records/schemas.ts'
import { PageBody } from '../records/search-body.ts'
import { DEFAULT_HISTORY, MAX_HISTORY, membershipHistory } from './members.ts'
import { Segment, SegmentHistory } from './schemas.ts'
import {
  createSegment,
  deleteSegment,
  listSegments,
  readSegment,
  SegmentBody,
  searchMembers,
  updateSegment,
} from './segments.ts'

const EXAMPLE = {
  name: 'At risk in the US',
  where: {
    and: [
      { propertyName: 'churn_risk', operator: 'GTE', value: '70' },
      { propertyName: 'country', operator: 'EQ', value: 'US' },
    ],
  },
}

// Segments are saved searches: reading and running them takes the search scope, saving and
// deleting them, as every write of the API, the upload scope.
export const segmentRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/segments',
    auth: { key: 'upload' },
    body: SegmentBody,
    refusals: [409],
    name: 'create-segment',
    tag: 'segments',
    summary: 'Save a customer search as a named segment',
    reply: { status: 201, body: Segment },
    example: EXAMPLE,
    handler: async (req, app) => ok(await createSegment(app, req.auth.accountId, req.input), 201),
  }),
  route({
    method: 'GET',
    path: '/api/v1/segments',
    auth: { key: 'search' },
    name: 'list-segments',
    tag: 'segments',
    summary: 'List segments',
    reply: { status: 200, body: v.array(Segment) },
    handler: async (req, app) => ok(await listSegments(app, req.auth.accountId)),
  }),
  route({
    method: 'GET',
    path: '/api/v1/segments/:segment_id',
    auth: { key: 'search' },
    name: 'get-segment',
    tag: 'segments',
    summary: 'Read a segment, with its member count',
    reply: { status: 200, body: Segment },
    handler: async (req, app) => ok(await readSegment(app, req.auth.accountId, segmentId(req))),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/segments/:segment_id',
    auth: { key: 'upload' },
    body: SegmentBody,
    refusals: [409],
    name: 'update-segment',
    tag: 'segments',
    summary: "Replace a segment's name and search",
    reply: { status: 200, body: Segment },
    example: EXAMPLE,
    handler: async (req, app) =>
      ok(await updateSegment(app, req.auth.accountId, segmentId(req), req.input)),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/segments/:segment_id',
    auth: { key: 'upload' },
    name: 'delete-segment',
    tag: 'segments',
    summary: 'Delete a segment and its membership history',
    reply: { status: 204 },
    handler: async (req, app) => (
      await deleteSegment(app, req.auth.accountId, segmentId(req)), noContent
    ),
  }),
  route({
    method: 'POST',
    path: '/api/v1/segments/:segment_id/search',
    auth: { key: 'search' },
    body: PageBody,
    refusals: [422],
    name: 'search-segment',
    tag: 'segments',
    summary: "A page of the segment's members: its saved search, run now",
    reply: { status: 200, body: CustomerPage },
    example: { limit: 50, properties: ['country'] },
    expensive: true,
    unaudited: 'read',
    handler: async (req, app) => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: await searchMembers(app, req.auth.accountId, segmentId(req), req.input, req),
    }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/segments/:segment_id/history',
    auth: { key: 'search' },
    query: {
      limit: {
        description: `How many, latest entry first (default ${DEFAULT_HISTORY}).`,
        schema: v.optional(
          v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_HISTORY)),
          DEFAULT_HISTORY,
        ),
      },
      after: {
        description: 'paging.next.after of the page before.',
        schema: v.pipe(v.number(), v.safeInteger(), v.minValue(1)),
      },
    },
    name: 'segment-history',
    tag: 'segments',
    summary: 'Who entered the segment and left it, when: current members have no exited_at',
    reply: { status: 200, body: SegmentHistory },
    handler: async (req, app) =>
      ok(await membershipHistory(app, req.auth.accountId, segmentId(req), req.queryInput)),
  }),
]

const segmentId = (req: Req) => idParam(req, 'segment_id')
