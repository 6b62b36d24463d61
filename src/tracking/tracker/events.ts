import type { Sql } from '../../db/client.ts'

// For support: how many events a customer (or the whole account) has sent, by state, and the
// most recent ones by event time, in the shape they were sent plus what became of them.
export const listEvents = async (
  sql: Sql,
  accountId: number,
  customer: string | undefined,
  limit: number,
) => {
  const ofCustomer = customer === undefined ? sql`` : sql`and customer_external_id = ${customer}`
  const [counts] = await sql`
    select count(*)::int as count,
      count(*) filter (where status = 'received')::int as received,
      count(*) filter (where status = 'applied')::int as applied,
      count(*) filter (where status = 'unmatched')::int as unmatched
    from tracking_events where account_id = ${accountId} ${ofCustomer}`
  const events = await sql`
    select id, name, (extract(epoch from occurred_at) * 1000)::bigint as timestamp,
      json_strip_nulls(json_build_object('customer', customer_external_id,
        'contact', contact_external_id)) as identification,
      data, status, customer_id as customer_service_id, contact_id as contact_service_id,
        received_at
    from tracking_events where account_id = ${accountId} ${ofCustomer}
    order by occurred_at desc, id desc limit ${limit}`
  const { count, ...byStatus } = counts
  return { customer: customer ?? null, count, by_status: byStatus, events }
}
