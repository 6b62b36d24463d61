import type { App } from '../context.ts'
import { budgetedStream, type Caller } from '../db/budget.ts'
import type { Tx } from '../db/client.ts'
import { refuse } from '../errors.ts'

// Access (docs/api.md, "Privacy"): everything held about a contact, or a customer with its
// contacts, as one JSON document: the stored record, its scores, snapshots and tags, the tracked
// events that identify it and the Segment messages that name it. The document is read in one
// repeatable-read transaction, so its parts agree, and streamed: the events, messages and contacts
// are read through cursors, a batch at a time, whatever their number.

interface Doc {
  service_id: number
  external_id: string
  doc: string
}

// One record's document, as JSON text: the row as stored (without the account), then what hangs on
// it. The subqueries name the account itself: Citus routes them by a constant, not by r's column.
const recordDoc = (
  db: Tx,
  accountId: number,
  entity: 'customer' | 'contact',
  where: ReturnType<Tx>,
) => {
  const [records, scores, snapshots, links, fk] =
    entity === 'customer'
      ? ['customers', 'customer_scores', 'customer_snapshots', 'customer_tags', 'customer_id']
      : ['contacts', 'contact_scores', 'contact_snapshots', 'contact_tags', 'contact_id']
  return db<Doc[]>`
    select r.service_id, r.external_id, json_build_object(
      'record', to_jsonb(r) - 'account_id',
      'scores', (select to_jsonb(s) - 'account_id' - ${fk} from ${db(scores)} s
        where s.account_id = ${accountId} and s.${db(fk)} = r.service_id),
      'snapshots', coalesce((select json_agg(json_build_object('date', s.date, 'values',
        s."values") order by s.date)
        from ${db(snapshots)} s where s.account_id = ${accountId}
          and s.${db(fk)} = r.service_id), '[]'),
      'tags', coalesce((select json_agg(t.title order by t.title) from ${db(links)} x
        join tags t on t.account_id = x.account_id and t.id = x.tag_id
        where x.account_id = ${accountId} and x.${db(fk)} = r.service_id), '[]')
    )::text as doc
    from ${db(records)} r where ${where}`
}

// The tracked events as GET /api/v1/customer/{external_id}/events shows them, oldest first, found
// through the customer's external id (its index). The apply job matches an event to its records by
// external id, so the service ids the event holds name the same records.
const events = (db: Tx, accountId: number, which: ReturnType<Tx>) => db<{ doc: string }[]>`
  select json_build_object('id', id, 'name', name, 'timestamp',
    (extract(epoch from occurred_at) * 1000)::bigint,
    'identification', json_strip_nulls(json_build_object('customer', customer_external_id,
      'contact', contact_external_id)), 'data', data, 'status', status, 'received_at',
        received_at)::text as doc
  from tracking_events where account_id = ${accountId} and (${which}) order by id`

// The Segment messages held that name the people (the erasure deletes the same: erase.ts), each as
// stored, oldest first. Done messages are kept SEGMENT_KEEP_DAYS, so the account's rows are few
// enough to read through its primary key.
const segmentMessages = (db: Tx, accountId: number, which: ReturnType<Tx>) => db<{ doc: string }[]>`
  select (to_jsonb(m) - 'account_id')::text as doc
  from segment_messages m where m.account_id = ${accountId} and (${which}) order by m.id`

const BATCH = 500

async function* array(query: { cursor(rows: number): AsyncIterable<{ doc: string }[]> }) {
  let first = true
  for await (const rows of query.cursor(BATCH)) {
    const docs = rows.map((r) => r.doc).join(',')
    yield first ? docs : `,${docs}`
    first = false
  }
}

// The record is found before the answer starts, so an unknown one is a 404; the rest streams, on
// the pool of expensive work under the search budget (db/budget.ts).
const exported = (
  app: App,
  caller: Caller | undefined,
  find: (db: Tx) => ReturnType<typeof recordDoc>,
  missing: string,
  parts: (db: Tx, record: Doc) => AsyncGenerator<string>,
) =>
  budgetedStream(
    app,
    caller,
    'search',
    'isolation level repeatable read read only',
    async (tx, track) => {
      const [record] = await track(find(tx))
      return record ? parts(tx, record) : refuse(404, missing)
    },
  )

export const exportContact = (
  app: App,
  accountId: number,
  customerExternalId: string,
  externalId: string,
  caller?: Caller,
) =>
  exported(
    app,
    caller,
    (db) =>
      recordDoc(
        db,
        accountId,
        'contact',
        db`r.account_id = ${accountId} and r.external_id = ${externalId} and r.customer_id = (
          select service_id from customers where account_id = ${accountId}
            and external_id = ${customerExternalId})`,
      ),
    `Contact ${externalId} of customer ${customerExternalId} does not exist.`,
    async function* (db, contact) {
      yield `{"contact":${contact.doc},"events":[`
      yield* array(
        events(
          db,
          accountId,
          db`customer_external_id = ${customerExternalId}
            and contact_external_id = ${contact.external_id}`,
        ),
      )
      yield '],"segment_messages":['
      yield* array(segmentMessages(db, accountId, db`m.user_id = ${contact.external_id}`))
      yield ']}'
    },
  )

export const exportCustomer = (app: App, accountId: number, externalId: string, caller?: Caller) =>
  exported(
    app,
    caller,
    (db) =>
      recordDoc(
        db,
        accountId,
        'customer',
        db`r.account_id = ${accountId} and r.external_id = ${externalId}`,
      ),
    `Customer ${externalId} does not exist.`,
    async function* (db, customer) {
      yield `{"customer":${customer.doc},"events":[`
      yield* array(events(db, accountId, db`customer_external_id = ${customer.external_id}`))
      yield '],"segment_messages":['
      yield* array(
        segmentMessages(
          db,
          accountId,
          db`m.group_id = ${customer.external_id} or m.user_id = any(array(select external_id
            from contacts
            where account_id = ${accountId} and customer_id = ${customer.service_id}))`,
        ),
      )
      yield '],"contacts":['
      yield* array(
        recordDoc(
          db,
          accountId,
          'contact',
          db`r.account_id = ${accountId} and r.customer_id = ${customer.service_id}
          order by r.service_id`,
        ),
      )
      yield ']}'
    },
  )
