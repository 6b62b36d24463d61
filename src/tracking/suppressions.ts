import * as v from 'valibot'
import type { Sql, Tx } from '../db/client.ts'
import { refuse } from '../errors.ts'
import { describe, Timestamp } from '../validate.ts'

// Suppressions (docs/security.md, "Privacy"): the external ids of erased customers and contacts,
// whose tracked events are dropped and counted instead of applied, so that an SDK that still sends
// them does not bring the person back. Uploads are not checked: a client that uploads the record
// again means it. Only the SHA-256 of an external id is stored, so the list names nobody.

type SuppressedEntity = 'customer' | 'contact'
const SUPPRESSED_ENTITIES: SuppressedEntity[] = ['customer', 'contact']

const hashOf = (sql: Sql | Tx, externalId: ReturnType<Sql>) =>
  sql`sha256(convert_to(${externalId}, 'UTF8'))`

// The one check, as a condition on SQL expressions naming an event's customer and contact external
// ids: true when either is suppressed in the account. The tracker's apply path uses it, and so does
// every other ingest that applies tracked data. Its first part names no row: read once per
// statement, it spares the hashing of every row of the accounts that have no suppression
// (most of them).
export const suppressedSql = (
  sql: Sql | Tx,
  accountId: number,
  customer: ReturnType<Sql>,
  contact: ReturnType<Sql>,
) =>
  sql`(exists (select 1 from suppressions where account_id = ${accountId})
    and exists (select 1 from suppressions x where x.account_id = ${accountId} and (
      (x.entity = 'customer' and x.hash = ${hashOf(sql, customer)})
      or (x.entity = 'contact' and x.hash = ${hashOf(sql, contact)}))))`

// Counts events dropped for the suppressions they matched; `dropped` yields (customer, contact)
// external ids, one row per event dropped.
export const countDropped = (sql: Sql | Tx, accountId: number, dropped: ReturnType<Sql>) => sql`
  update suppressions x set dropped = x.dropped + n.n
  from (
    select e.entity, e.hash, count(*) as n
    from (${dropped}) d(customer, contact)
      cross join lateral (values ('customer', ${hashOf(sql, sql`d.customer`)}),
        ('contact', ${hashOf(sql, sql`d.contact`)})) e(entity, hash)
    where e.hash is not null group by 1, 2
  ) n
  where x.account_id = ${accountId} and x.entity = n.entity and x.hash = n.hash`

// Adds suppressions for the external ids that `ids` yields as (entity, external_id), in the
// caller's transaction (an erasure's).
export const suppress = (tx: Tx, accountId: number, erasureId: number, ids: ReturnType<Tx>) => tx`
  insert into suppressions (account_id, entity, hash, erasure_id)
  select distinct ${accountId}::bigint, i.entity, ${hashOf(tx, tx`i.external_id`)},
  ${erasureId}::bigint
  from (${ids}) i(entity, external_id)
  on conflict (account_id, entity, hash) do nothing`

export const Suppression = v.object({
  entity: v.picklist(SUPPRESSED_ENTITIES),
  hash: describe(
    v.string(),
    'The SHA-256 of the external id (UTF-8), hexadecimal: the list names nobody.',
  ),
  erasure_id: v.nullable(v.number()),
  created_at: Timestamp,
  dropped: describe(v.number(), 'Tracked events dropped since the suppression began.'),
})

export const listSuppressions = (sql: Sql, accountId: number) => sql`
  select entity, encode(hash, 'hex') as hash, erasure_id, created_at, dropped::float8 as dropped
  from suppressions where account_id = ${accountId} order by created_at desc, entity, hash
    limit 10000`

// A lifted suppression lets the external id's events be applied again (they may create
// the contact).
export const liftSuppression = async (
  sql: Sql,
  accountId: number,
  entity: string,
  externalId: string,
) => {
  if (!SUPPRESSED_ENTITIES.includes(entity as SuppressedEntity))
    refuse(404, `No suppression kind ${entity}: the kinds are customer and contact.`)
  const [row] = await sql`
    delete from suppressions where account_id = ${accountId} and entity = ${entity}
      and hash = ${hashOf(sql, sql`${externalId}::text`)} returning 1`
  if (!row) refuse(404, `No ${entity} ${externalId} is suppressed.`)
}
