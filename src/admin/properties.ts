import * as v from 'valibot'
import { refuse } from '../errors.ts'
import type { Entity, PropertyDef } from '../catalog.ts'
import type { Sql, Tx } from '../db/client.ts'
import { lockRecordsIn } from '../db/locks.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'
import { TABLES } from '../db/tables.ts'
import { storable, strict } from '../validate.ts'

const title = v.pipe(v.string(), v.trim(), v.minLength(1), v.maxLength(255), storable)

export const UserBody = strict({
  email: v.pipe(v.string(), v.trim(), v.email(), v.maxLength(255), storable),
  name: v.optional(v.pipe(v.string(), v.maxLength(255), storable)),
})

export const PropertyBody = v.pipe(
  strict({
    entity: v.picklist(['customer', 'contact']),
    kind: v.picklist(['attribute', 'metric']),
    codename: v.pipe(
      v.string(),
      v.regex(
        /^[A-Za-z_][A-Za-z0-9_]{0,62}$/,
        'Must be letters, digits and _ (at most 63), not starting with a digit.',
      ),
    ),
    type: v.picklist(['string', 'number', 'boolean', 'date']),
    name: v.optional(v.pipe(v.string(), v.maxLength(255), storable)),
  }),
  // `date` names the snapshot in every metric object, so no metric may take it.
  v.forward(
    v.check((p) => !(p.kind === 'metric' && p.codename === 'date'), '`date` is reserved in metric objects.'),
    ['codename'],
  ),
)

export const TagBody = strict({
  title,
  color: v.optional(v.pipe(v.string(), v.regex(/^#[0-9a-fA-F]{6}$/, 'Must be a #rrggbb colour.'))),
})

const unique = (what: string) => (err: unknown) => {
  if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) refuse(409, `${what} already exists in this account.`)
  throw err
}

export const addUser = async (sql: Sql, accountId: number, body: v.InferOutput<typeof UserBody>) =>
  (
    await sql`
    insert into users (account_id, email, name) values (${accountId}, ${body.email}, ${body.name ?? null})
    returning id, email, name`.catch(unique(`A user with email ${body.email}`))
  )[0]

export const listUsers = (sql: Sql, accountId: number) =>
  sql`select id, email, name from users where account_id = ${accountId} order by id`

export const defineProperty = async (sql: Sql, accountId: number, body: v.InferOutput<typeof PropertyBody>) =>
  (
    await sql`
    insert into property_defs (account_id, entity, kind, codename, type, name)
    values (${accountId}, ${body.entity}, ${body.kind}, ${body.codename}, ${body.type}, ${body.name ?? null})
    returning entity, kind, codename, type, name, system`.catch(unique(`The ${body.entity} property ${body.codename}`))
  )[0]

// The one way the property catalog is read: the account's definitions of an entity as a json
// array of {codename, kind, type}. A subquery, so that callers read it in the round trip that reads
// whatever else they need.
export const catalogSql = (sql: Sql | Tx, accountId: number, entity: Entity) => sql`
  (select coalesce(json_agg(json_build_object('codename', p.codename, 'kind', p.kind, 'type', p.type)), '[]')
   from property_defs p where p.account_id = ${accountId} and p.entity = ${entity})`

export const readCatalog = async (sql: Sql | Tx, accountId: number, entity: Entity) =>
  (await sql`select ${catalogSql(sql, accountId, entity)} as defs`)[0].defs as PropertyDef[]

export const listProperties = (sql: Sql, accountId: number) => sql`
  select entity, kind, codename, type, name, system from property_defs
  where account_id = ${accountId} order by entity, codename`

export const createTag = async (sql: Sql, accountId: number, body: v.InferOutput<typeof TagBody>) =>
  (
    await sql`
    insert into tags (account_id, title, color) values (${accountId}, ${body.title}, ${body.color ?? null})
    returning id, title, color`.catch(unique(`The tag ${body.title}`))
  )[0]

export const listTags = (sql: Sql, accountId: number) =>
  sql`select id, title, color from tags where account_id = ${accountId} order by lower(title)`

// A property goes with its values: the records' attributes or latest metrics and, for a metric,
// every snapshot's. Refused (409) while something names it: a system attribute, the scoring model,
// a segment (found by `usedBy`, so that this module need not know segments). The definition is
// locked first: a segment saved meanwhile waits for it (segments/segments.ts) and then finds the
// property gone; one saved before is seen here.
export const deleteProperty = (
  sql: Sql,
  accountId: number,
  entity: Entity,
  codename: string,
  usedBy: (tx: Tx) => Promise<string[]>,
) =>
  sql.begin(async (tx) => {
    const [def] = await tx`select kind, system from property_defs
      where account_id = ${accountId} and entity = ${entity} and codename = ${codename} for update`
    if (!def) refuse(404, `No ${entity} property ${codename} in this account.`)
    if (def.system) refuse(409, `${codename} is a system attribute; it cannot be deleted.`)
    const rule = `$.${entity}.** ? (@.codename == $c)`
    const [model] = await tx`select 1 from scoring_models where account_id = ${accountId}
      and jsonb_path_exists(model, ${rule}::jsonpath, jsonb_build_object('c', ${codename}::text))`
    if (model) refuse(409, `The scoring model uses the ${entity} property ${codename}.`)
    const users = await usedBy(tx)
    if (users.length) refuse(409, `Segments use the ${entity} property ${codename}: ${users.join(', ')}.`)
    const t = TABLES[entity]
    const bag = def.kind === 'attribute' ? 'attributes' : 'metrics'
    await lockRecordsIn(
      tx,
      t.records,
      accountId,
      tx`select service_id from ${tx(t.records)} where account_id = ${accountId} and ${tx(bag)} ? ${codename}`,
    )
    await tx`update ${tx(t.records)} set ${tx(bag)} = ${tx(bag)} - ${codename}::text
      where account_id = ${accountId} and ${tx(bag)} ? ${codename}`
    if (def.kind === 'metric') {
      await tx`update ${tx(t.snapshots)} set "values" = "values" - ${codename}::text
        where account_id = ${accountId} and "values" ? ${codename}`
    }
    await tx`delete from property_defs
      where account_id = ${accountId} and entity = ${entity} and codename = ${codename}`
  })
