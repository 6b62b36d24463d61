import type { PendingQuery, Row } from 'postgres'
import type { Tx } from '../db/client.ts'

// The contacts an ingest creates of itself (the tracker's events, Segment's groups, identifies and
// tracks): one per external id `external` yields from `from` where `where` holds, under the customer
// `customer` of the first row by `order`, unless the contact exists already (what then changes of it
// is the caller's). Yields the contacts created.
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
  select distinct on (${q.external}) ${accountId}::bigint, ${q.external}, ${q.customer}
  from ${q.from}
  where ${q.where}
    and not exists (select 1 from contacts t where t.account_id = ${accountId} and t.external_id = ${q.external})
  order by ${q.external}, ${q.order}
  on conflict (account_id, external_id) do nothing
  returning service_id, external_id, customer_id`
