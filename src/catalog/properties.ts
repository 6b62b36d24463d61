// The property catalog: every statement that reads or writes property_defs, besides the system
// attributes written with a new account (accounts/accounts.ts, as catalog/ imports accounts/).
import * as v from 'valibot'
import { refuse } from '../errors.ts'
import type { Entity, PropertyDef } from '../property.ts'
import type { Sql, Tx } from '../db/client.ts'
import { lockRecordsIn } from '../db/locks.ts'
import { TABLES } from '../db/tables.ts'
import { describe, storable, strict } from '../validate.ts'
import { alreadyExists } from './exists.ts'

const entity = v.picklist(['customer', 'contact'])
const kind = v.picklist(['attribute', 'metric'])
const type = v.picklist(['string', 'number', 'boolean', 'date'])

const Label = describe(
  v.pipe(v.string(), v.minLength(1), v.maxLength(255), storable),
  'The name people read: the console, its CSV export and score explanations show it in place of the codename.',
)

export const PropertyBody = v.pipe(
  strict({
    entity,
    kind,
    codename: v.pipe(
      v.string(),
      v.regex(
        /^[A-Za-z_][A-Za-z0-9_]{0,62}$/,
        'Must be letters, digits and _ (at most 63), not starting with a digit.',
      ),
    ),
    type,
    label: v.optional(Label),
    name: v.optional(describe(Label, 'The older spelling of label.')),
  }),
  v.forward(
    v.check(
      (p) => p.label === undefined || p.name === undefined,
      'Give label or name (its older spelling), not both.',
    ),
    ['name'],
  ),
  v.metadata({
    not: { type: 'object', properties: { label: {}, name: {} }, required: ['label', 'name'] },
  }),
  // `date` names the snapshot in every metric object, so no metric may take it.
  v.forward(
    v.check(
      (p) => !(p.kind === 'metric' && p.codename === 'date'),
      '`date` is reserved in metric objects.',
    ),
    ['codename'],
  ),
)

export const Property = v.object({
  entity,
  kind,
  codename: v.string(),
  type,
  label: describe(v.nullable(v.string()), 'The name people read; null shows the codename.'),
  name: describe(v.nullable(v.string()), 'The same as label (its older spelling).'),
  system: describe(v.boolean(), 'Defined by the service for every account.'),
})

// The label is stored in the column `name`, the field's first spelling.
const columns = (sql: Sql | Tx) => sql`entity, kind, codename, type, name as label, name, system`

export const defineProperty = async (
  sql: Sql,
  accountId: number,
  body: v.InferOutput<typeof PropertyBody>,
) =>
  (
    await sql`
    insert into property_defs (account_id, entity, kind, codename, type, name) values
      (${accountId}, ${body.entity}, ${body.kind}, ${body.codename}, ${body.type},
        ${body.label ?? body.name ?? null})
    returning ${columns(sql)}`.catch(alreadyExists(`The ${body.entity} property ${body.codename}`))
  )[0]

// The catalog as the search, upload, record and scoring paths read it: the account's definitions of
// an entity as a json array of {codename, kind, type}. A subquery, so that callers read it in the
// round trip that reads whatever else they need.
export const catalogSql = (sql: Sql | Tx, accountId: number, entity: Entity) => sql`
  (select coalesce(json_agg(json_build_object('codename', p.codename, 'kind', p.kind, 'type',
    p.type)), '[]')
   from property_defs p where p.account_id = ${accountId} and p.entity = ${entity})`

export const readCatalog = async (sql: Sql | Tx, accountId: number, entity: Entity) =>
  (await sql`select ${catalogSql(sql, accountId, entity)} as defs`)[0].defs as PropertyDef[]

// The account's definitions as a table (entity, kind, codename, type), for a set-based statement of
// another module to join in its own round trip. PostgreSQL pulls the subquery up into that join, so
// the plan is the one a join of property_defs itself gets.
export const definitionsSql = (sql: Sql | Tx, accountId: number) =>
  sql`(select entity, kind, codename, type from property_defs where account_id = ${accountId})`

// The entity's definitions locked against deletion until the transaction ends (deleteProperty
// waits for it), for a caller that stores something naming them.
export const lockDefinitions = (tx: Tx, accountId: number, entity: Entity) =>
  tx`select 1 from property_defs where account_id = ${accountId} and entity = ${entity} for share`

// Only an account with a number metric can have a metric named like an event.
export const accountsWithNumberMetrics = async (sql: Sql) =>
  (
    await sql<{ account_id: number }[]>`
      select distinct account_id from property_defs where kind = 'metric' and type = 'number'
      order by account_id`
  ).map((r) => r.account_id)

export const listProperties = (sql: Sql, accountId: number) => sql`
  select ${columns(sql)} from property_defs where account_id = ${accountId}
    order by entity, codename`

export const RelabelBody = strict({ label: v.nullable(Label) })

// Sets or clears (null) a property's label; codename, kind and type never change.
export const relabelProperty = async (
  sql: Sql,
  accountId: number,
  entity: Entity,
  codename: string,
  body: v.InferOutput<typeof RelabelBody>,
) => {
  const [row] = await sql`update property_defs set name = ${body.label}
    where account_id = ${accountId} and entity = ${entity} and codename = ${codename}
      returning ${columns(sql)}`
  return row ?? refuse(404, `No ${entity} property ${codename} in this account.`)
}

// Each labelled property's label by codename, for answers that name properties to people.
export const readLabels = async (sql: Sql | Tx, accountId: number, entity: Entity) =>
  (
    await sql`select coalesce(json_object_agg(codename, name), '{}') as labels from property_defs
      where account_id = ${accountId} and entity = ${entity} and name is not null`
  )[0].labels as Record<string, string>

// The segments whose saved search names a customer property (propertyName anywhere in the body: a
// filter, a leaf of a where tree, a sort key). Read here, not called in segments/: segments/ reads
// the catalog, and catalog/ calling it back would make the two folders a cycle.
const segmentsNaming = async (tx: Tx, accountId: number, codename: string) =>
  (
    await tx<{ name: string }[]>`select name from segments where account_id = ${accountId}
      and jsonb_path_exists(body, '$.**.propertyName ? (@ == $c)',
        jsonb_build_object('c', ${codename}::text))
      order by name`
  ).map((r) => r.name)

// A property goes with its values: the records' attributes or latest metrics and, for a metric,
// every snapshot's. Refused (409) while something names it: a system attribute, the scoring model,
// a segment (segments search customers only). The definition is locked first: a segment saved
// meanwhile waits for it (lockDefinitions) and then finds the property gone; one saved before is
// seen here.
export const deleteProperty = (sql: Sql, accountId: number, entity: Entity, codename: string) =>
  sql.begin(async (tx) => {
    const [def] = await tx`select kind, system from property_defs
      where account_id = ${accountId} and entity = ${entity} and codename = ${codename} for update`
    if (!def) refuse(404, `No ${entity} property ${codename} in this account.`)
    if (def.system) refuse(409, `${codename} is a system attribute; it cannot be deleted.`)
    const rule = `$.${entity}.** ? (@.codename == $c)`
    const [model] = await tx`select 1 from scoring_models where account_id = ${accountId}
      and jsonb_path_exists(model, ${rule}::jsonpath, jsonb_build_object('c', ${codename}::text))`
    if (model) refuse(409, `The scoring model uses the ${entity} property ${codename}.`)
    const users = entity === 'customer' ? await segmentsNaming(tx, accountId, codename) : []
    if (users.length)
      refuse(409, `Segments use the ${entity} property ${codename}: ${users.join(', ')}.`)
    const t = TABLES[entity]
    const bag = def.kind === 'attribute' ? 'attributes' : 'metrics'
    await lockRecordsIn(
      tx,
      t.records,
      accountId,
      tx`select service_id from ${tx(t.records)} where account_id = ${accountId}
        and ${tx(bag)} ? ${codename}`,
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
