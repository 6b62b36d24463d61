import type { PendingQuery, Row } from 'postgres'
import type { Tx } from '../../db/client.ts'

// The records an ingest writes of itself. The contacts it creates (the tracker's events, the
// relay's groups, identifies and tracks): one per external id `external` yields from `from` where
// `where` holds, under the customer `customer` of the first row by `order`, unless the contact
// exists already (what then changes of it is the caller's). Yields the contacts created. The rows
// are chosen in a subquery and the contact's absence is an anti-join after it: `from` joins a
// coordinator staging table, and Citus refuses a subquery on a distributed table correlated to it,
// or a join of two distributed tables beside it.
export const createContactsSql = (
  tx: Tx,
  accountId: number,
  q: {
    external: PendingQuery<Row[]>
    customer: PendingQuery<Row[]>
    from: PendingQuery<Row[]>
    where: PendingQuery<Row[]>
    order: PendingQuery<Row[]>
  },
) => tx`
  insert into contacts (account_id, external_id, customer_id)
  select ${accountId}::bigint, n.external_id, n.customer_id
  from (select distinct on (${q.external}) ${q.external} as external_id,
    ${q.customer} as customer_id
        from ${q.from} where ${q.where} order by ${q.external}, ${q.order}) n
    left join contacts known on known.account_id = ${accountId}
      and known.external_id = n.external_id
  where known.service_id is null
  on conflict (account_id, external_id) do nothing
  returning service_id, external_id, customer_id`

// The one update of records' names and attributes from what an ingest received: `f` yields `name`
// (null keeps the record's) and `attributes` (merged in; a null value clears its key) for the
// records `r` that `match` picks. Yields the records updated.
export const updateRecords = (
  tx: Tx,
  table: 'customers' | 'contacts',
  accountId: number,
  f: PendingQuery<Row[]>,
  match: PendingQuery<Row[]>,
) => tx`
  update ${tx(table)} r set name = coalesce(f.name, r.name),
    attributes = jsonb_strip_nulls(r.attributes || f.attributes), updated_at = now()
  from (${f}) f
  where r.account_id = ${accountId} and ${match}
  returning r.service_id`
