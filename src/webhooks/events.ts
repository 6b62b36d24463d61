import { toJsonSchema } from '@valibot/to-json-schema'
import * as v from 'valibot'
import { ALERT_SCORES, ChangeDriverSchema } from '../scoring/rules/alerts.ts'
import { describe, int } from '../validate.ts'

// The event catalog: every event a subscription can choose, its payload's schema (published by
// GET /admin/v1/event-types and checked against every delivery in the tests) and an example, which
// the test-send endpoint delivers. Every event is a list of items cut into chunks of up to 1000,
// each chunk one delivery: {event, timestamp, data: {...head, <list>: [...], batch}}.
// customer.created is the interface spec's "Events > Payload" byte for byte; the others
// follow its pattern.
export const BATCH_SIZE = 1000

const Timestamp = v.pipe(v.string(), v.isoTimestamp())
const Day = v.pipe(v.string(), v.isoDate())

const customerRef = {
  service_id: describe(int, 'The id the service gave the customer.'),
  external_id: describe(v.string(), 'The external id the client gave it.'),
  name: v.nullable(v.string()),
}

const item = {
  'customer.created': v.object({ ...customerRef, created_at: Timestamp }),
  'contact.created': v.object({
    service_id: describe(int, 'The id the service gave the contact.'),
    contact_external_id: v.string(),
    name: v.nullable(v.string()),
    customer_external_id: v.string(),
    created_at: Timestamp,
  }),
  'customer.churned': v.object({
    ...customerRef,
    churned_date: Day,
    reason: describe(
      v.picklist(['manual', 'inactive']),
      "manual: set through the API; inactive: not seen for the scoring model's churn.inactive_days.",
    ),
  }),
  'customer.reactivated': v.object({
    ...customerRef,
    churned_date: describe(Day, 'The churn date that ended.'),
    reason: describe(
      v.picklist(['manual', 'activity']),
      'manual: set active through the API; activity: a snapshot dated after an automatic churn.',
    ),
  }),
  'customer.score_changed': v.object({
    ...customerRef,
    score: v.picklist(ALERT_SCORES),
    old_value: describe(
      v.number(),
      'An integer for the rule scores; in 0..1 for churn_probability.',
    ),
    new_value: describe(
      v.number(),
      'An integer for the rule scores; in 0..1 for churn_probability.',
    ),
    crossed: describe(
      v.nullable(v.number()),
      'The threshold crossed, or null when the move alone reached the delta.',
    ),
    scoring_date: describe(Day, 'The date the new value was scored as of.'),
    change_drivers: describe(
      v.array(ChangeDriverSchema),
      'The properties whose contributions moved most between the two scorings, largest move first.',
    ),
  }),
  'segment.entered': v.object(customerRef),
  'segment.exited': v.object({
    ...customerRef,
    name: describe(v.nullable(v.string()), 'Null when the customer no longer exists (deleted).'),
  }),
} as const

export type EventName = keyof typeof item
export const EVENTS = Object.keys(item) as EventName[]
export type EventItem<E extends EventName> = v.InferOutput<(typeof item)[E]>

// The key of each event's list, the batch's total_<list>, and the fields before the list.
const list: Record<EventName, 'customers' | 'contacts' | 'changes'> = {
  'customer.created': 'customers',
  'contact.created': 'contacts',
  'customer.churned': 'customers',
  'customer.reactivated': 'customers',
  'customer.score_changed': 'changes',
  'segment.entered': 'customers',
  'segment.exited': 'customers',
}
const segment = describe(
  v.object({ id: int, name: v.string() }),
  'The saved segment (GET /api/v1/segments/{id}).',
)
const head: Partial<Record<EventName, v.ObjectEntries>> = {
  'customer.created': {
    source: describe(v.string(), 'Where the customers came from: API, FILE or an integration.'),
  },
  'contact.created': {
    source: describe(v.string(), 'Where the contacts came from: API, FILE or an integration.'),
  },
  'segment.entered': { segment },
  'segment.exited': { segment },
}

const description: Record<EventName, string> = {
  'customer.created':
    'Customers were created (an upload, a single create, a CSV import): the interface spec event.',
  'contact.created': 'Contacts were created.',
  'customer.churned':
    'Customers became churned, set through the API or automatically after churn.inactive_days.',
  'customer.reactivated':
    'Churned customers became active again, through the API or a newer snapshot.',
  'customer.score_changed':
    "A score crossed one of the account's thresholds, or moved at least the account's delta, between two " +
    'scorings (PUT /admin/v1/accounts/{id}/score-alerts).',
  'segment.entered':
    "Customers started to match a saved segment's search (its first computation excepted).",
  'segment.exited': "Customers stopped matching a saved segment's search, or were deleted.",
}

const payloadSchema = (event: EventName) =>
  v.object({
    event: v.literal(event),
    timestamp: Timestamp,
    data: v.object({
      ...head[event],
      [list[event]]: v.array(item[event]),
      batch: v.object({
        current_batch: int,
        total_batches: int,
        [`total_${list[event]}`]: int,
        batch_size: int,
      }),
    }),
  })

export const PAYLOADS = Object.fromEntries(EVENTS.map((e) => [e, payloadSchema(e)])) as Record<
  EventName,
  ReturnType<typeof payloadSchema>
>

const chunk = <T>(items: T[], size: number): T[][] => {
  const chunks: T[][] = []
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size))
  return chunks
}

// Items are copied field by field in the schema's order, so that extra row columns never leak into
// a payload and the key order on the wire is the documented one.
const pick = (event: EventName, row: Record<string, unknown>) =>
  Object.fromEntries(Object.keys(item[event].entries).map((key) => [key, row[key]]))

// The payload bytes of each chunk, frozen at enqueue time.
export const buildPayloads = <E extends EventName>(
  event: E,
  items: EventItem<E>[],
  timestamp: string,
  fields: Record<string, unknown> = {},
): string[] => {
  const batches = chunk(items, BATCH_SIZE)
  const name = list[event]
  return batches.map((batch, i) =>
    JSON.stringify({
      event,
      timestamp,
      data: {
        ...fields,
        [name]: batch.map((row) => pick(event, row as Record<string, unknown>)),
        batch: {
          current_batch: i + 1,
          total_batches: batches.length,
          [`total_${name}`]: items.length,
          batch_size: batch.length,
        },
      },
    }),
  )
}

const at = '2026-11-25T09:30:00.000Z'
const acme = { service_id: 1042, external_id: 'acme-1', name: 'Acme Inc.' }
const examples: { [E in EventName]: { items: EventItem<E>[]; fields?: Record<string, unknown> } } =
  {
    'customer.created': { items: [{ ...acme, created_at: at }], fields: { source: 'API' } },
    'contact.created': {
      items: [
        {
          service_id: 7,
          contact_external_id: 'pat',
          name: 'Pat Doe',
          customer_external_id: 'acme-1',
          created_at: at,
        },
      ],
      fields: { source: 'API' },
    },
    'customer.churned': { items: [{ ...acme, churned_date: '2026-11-25', reason: 'inactive' }] },
    'customer.reactivated': {
      items: [{ ...acme, churned_date: '2026-10-01', reason: 'activity' }],
    },
    'customer.score_changed': {
      items: [
        {
          ...acme,
          score: 'churn_risk',
          old_value: 64,
          new_value: 73,
          crossed: 70,
          scoring_date: '2026-11-25',
          change_drivers: [
            { score: 'engagement', codename: 'logins', before: 31.5, after: 12 },
            { score: 'fit', codename: 'seats', before: 20, after: 18.75 },
          ],
        },
      ],
    },
    'segment.entered': { items: [acme], fields: { segment: { id: 3, name: 'At risk' } } },
    'segment.exited': { items: [acme], fields: { segment: { id: 3, name: 'At risk' } } },
  }

export const examplePayload = <E extends EventName>(event: E, timestamp = at) =>
  buildPayloads(event, examples[event].items, timestamp, examples[event].fields)[0]

// A payload schema holds no named or lazy schemas: plain JSON Schema, converted once,
// on first request.
const jsonSchema = (event: EventName) => {
  const { $schema: _, ...schema } = toJsonSchema(PAYLOADS[event], {
    target: 'draft-2020-12',
    errorMode: 'ignore',
  })
  return schema
}
const describeEventTypes = () =>
  EVENTS.map((name) => ({
    name,
    description: description[name],
    schema: jsonSchema(name),
    example: JSON.parse(examplePayload(name)),
  }))
let eventTypes: ReturnType<typeof describeEventTypes> | undefined
export const listEventTypes = () => (eventTypes ??= describeEventTypes())
