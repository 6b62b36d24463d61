import * as v from 'valibot'
import { selection } from '../records/search-body.ts'
import { describe, id, int, Timestamp } from '../validate.ts'

export const Segment = v.object({
  id,
  name: v.string(),
  ...selection,
  members: describe(int, 'Customers in the segment as of its latest recomputation (computed_at).'),
  computed_at: describe(
    v.nullable(Timestamp),
    'When its membership was last recomputed; null before the first time.',
  ),
  created_at: Timestamp,
  updated_at: Timestamp,
})

export const SegmentHistory = v.object({
  results: v.array(
    v.object({
      customer: describe(v.string(), "The customer's external id."),
      service_id: int,
      entered_at: describe(Timestamp, 'When the recomputation found it matching.'),
      exited_at: describe(
        v.nullable(Timestamp),
        'When a recomputation found it no longer matching; null: a member.',
      ),
    }),
  ),
  paging: describe(
    v.optional(v.object({ next: v.object({ after: int }) })),
    'Present when there is a next page: send `after` back as ?after= to get it.',
  ),
})
