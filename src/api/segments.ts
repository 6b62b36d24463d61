import * as v from 'valibot'
import { idParam } from '../route.ts'
import type { Req, Route } from '../route.ts'
import { PageBody } from '../records/search.ts'
import { DEFAULT_HISTORY, MAX_HISTORY, membershipHistory } from '../segments/members.ts'
import {
  createSegment,
  deleteSegment,
  listSegments,
  readSegment,
  SegmentBody,
  searchMembers,
  updateSegment,
} from '../segments/segments.ts'
import { CustomerPage, Segment, SegmentHistory } from './schemas.ts'

const account = (req: Req) => req.auth!.accountId
const segmentId = (req: Req) => idParam(req, 'segment_id')
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
  {
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
    handler: async (req, app) => ({
      status: 201,
      body: await createSegment(app, account(req), req.input as SegmentBody),
    }),
  },
  {
    method: 'GET',
    path: '/api/v1/segments',
    auth: { key: 'search' },
    name: 'list-segments',
    tag: 'segments',
    summary: 'List segments',
    reply: { status: 200, body: v.array(Segment) },
    handler: async (req, app) => ({ status: 200, body: await listSegments(app, account(req)) }),
  },
  {
    method: 'GET',
    path: '/api/v1/segments/:segment_id',
    auth: { key: 'search' },
    name: 'get-segment',
    tag: 'segments',
    summary: 'Read a segment, with its member count',
    reply: { status: 200, body: Segment },
    handler: async (req, app) => ({ status: 200, body: await readSegment(app, account(req), segmentId(req)) }),
  },
  {
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
    handler: async (req, app) => ({
      status: 200,
      body: await updateSegment(app, account(req), segmentId(req), req.input as SegmentBody),
    }),
  },
  {
    method: 'DELETE',
    path: '/api/v1/segments/:segment_id',
    auth: { key: 'upload' },
    name: 'delete-segment',
    tag: 'segments',
    summary: 'Delete a segment and its membership history',
    reply: { status: 204 },
    handler: async (req, app) => (await deleteSegment(app, account(req), segmentId(req)), { status: 204 }),
  },
  {
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
    handler: async (req, app) => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: await searchMembers(app, account(req), segmentId(req), req.input as PageBody, req),
    }),
  },
  {
    method: 'GET',
    path: '/api/v1/segments/:segment_id/history',
    auth: { key: 'search' },
    query: {
      limit: {
        description: `How many, latest entry first (default ${DEFAULT_HISTORY}).`,
        schema: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_HISTORY)), DEFAULT_HISTORY),
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
    handler: async (req, app) => ({
      status: 200,
      body: await membershipHistory(
        app,
        account(req),
        segmentId(req),
        req.queryInput as { limit: number; after?: number },
      ),
    }),
  },
]
