import * as v from 'valibot'
import { refuse } from '../errors.ts'
import type { Entity } from '../property.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addRecomputeSegments } from '../db/jobs.ts'
import { id, storable, strict } from '../validate.ts'
import { alreadyExists } from './exists.ts'

export const TagBody = strict({
  title: v.pipe(v.string(), v.trim(), v.minLength(1), v.maxLength(255), storable),
  color: v.optional(v.pipe(v.string(), v.regex(/^#[0-9a-fA-F]{6}$/, 'Must be a #rrggbb colour.'))),
})

export const TagTitlesBody = strict({
  titles: v.pipe(
    v.array(v.pipe(v.string(), v.maxLength(255, 'At most 255 characters.'), storable)),
    v.maxLength(1000, 'At most 1000 titles.'),
  ),
})

export const Tag = v.object({ id, title: v.string(), color: v.nullable(v.string()) })
export const TagTitles = v.object({ titles: v.array(v.string()) })

export const createTag = async (sql: Sql, accountId: number, body: v.InferOutput<typeof TagBody>) =>
  (
    await sql`
    insert into tags (account_id, title, color) values (${accountId}, ${body.title},
      ${body.color ?? null})
    returning id, title, color`.catch(alreadyExists(`The tag ${body.title}`))
  )[0]

export const listTags = (sql: Sql, accountId: number) =>
  sql`select id, title, color from tags where account_id = ${accountId} order by lower(title)`

// Each entity's records and the table linking them to their tags.
const TAGGED = {
  customer: { records: 'customers', links: 'customer_tags', key: 'customer_id' },
  contact: { records: 'contacts', links: 'contact_tags', key: 'contact_id' },
} as const

interface Resolved {
  service_id: number
  tags: { i: number; id: number | null; title: string }[]
}

// The record, locked so that concurrent replacements apply one after the other instead of
// merging, and each requested title with its tag (matched case-insensitively), or null.
const lockAndResolve = async (
  sql: Tx,
  accountId: number,
  entity: Entity,
  externalId: string,
  titles: string[],
) => {
  const { records } = TAGGED[entity]
  const [row] = await sql`
    select r.service_id, coalesce((
        select json_agg(json_build_object('i', w.ord - 1, 'id', t.id, 'title',
          w.title) order by w.ord)
        from unnest(${titles}::text[]) with ordinality w(title, ord)
          left join tags t on t.account_id = ${accountId} and lower(t.title) = lower(w.title)
      ), '[]') as tags
    from ${sql(records)} r where r.account_id = ${accountId} and r.external_id = ${externalId}
    for update of r`
  return row as Resolved | undefined
}

// Replaces the record's tags; answers with its tag titles in byte order, as search shows them.
export const setRecordTags = (
  sql: Sql,
  accountId: number,
  entity: Entity,
  externalId: string,
  titles: string[],
) =>
  sql.begin(async (tx) => {
    // Postgres text cannot hold NUL, so no record has such an id.
    const record = externalId.includes('\u0000')
      ? undefined
      : await lockAndResolve(tx, accountId, entity, externalId, titles)
    if (!record) return refuse(404, `No ${entity} with external id ${JSON.stringify(externalId)}.`)
    const unknown = record.tags.filter((t) => t.id === null)
    if (unknown.length > 0) {
      refuse(
        400,
        'Some titles name no tag of this account.',
        unknown.map((t) => ({
          path: `/titles/${t.i}`,
          message: `No tag titled ${JSON.stringify(t.title)}.`,
        })),
      )
    }
    const ids = [...new Set(record.tags.map((t) => t.id!))]
    const { links, key } = TAGGED[entity]
    if (entity === 'customer') await addRecomputeSegments(tx, accountId)
    const rows = await tx<{ title: string }[]>`
      with removed as (
        delete from ${tx(links)} where account_id = ${accountId}
          and ${tx(key)} = ${record.service_id}
          and tag_id <> all(${ids}::bigint[])
      ), added as (
        insert into ${tx(links)} (account_id, ${tx(key)}, tag_id, external_id)
        select ${accountId}, ${record.service_id}, unnest(${ids}::bigint[]), ${externalId}
        on conflict do nothing
      )
      select title from tags where account_id = ${accountId} and id = any(${ids}::bigint[])
        order by title collate "C"`
    return { titles: rows.map((r) => r.title) }
  })
