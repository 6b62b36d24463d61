// Saved segments: a named customer search (its filters or where tree, and whatever else of a search
// body picks and orders the records) per account, checked against the property catalog on save by
// the search compiler itself, and recomputed into segment_members (members.ts) after every change.
import * as v from 'valibot'
import type { App } from '../context.ts'
import { lockDefinitions } from '../catalog/properties.ts'
import type { Caller } from '../db/budget.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addRecomputeSegments } from '../db/jobs.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'
import { refuse } from '../errors.ts'
import { type PageBody, type SearchBody, savedSearch } from '../records/search-body.ts'
import { searchContext, searchInput, searchPage } from '../records/search.ts'
import { compileMembers } from '../search/sql.ts'
import { parse, storable } from '../validate.ts'

export const SegmentBody = savedSearch({
  name: v.pipe(
    v.string(),
    v.trim(),
    v.minLength(1, 'Must not be empty.'),
    v.maxLength(255),
    storable,
  ),
})
export type SegmentBody = v.InferOutput<typeof SegmentBody>

const SavedSearch = savedSearch({})
type SavedSearch = v.InferOutput<typeof SavedSearch>

// A saved search as stored, checked again as it is read: one saved before a limit it is past is
// refused (400), and the recomputation skips it.
export const savedOf = (body: unknown) => parse(SavedSearch, body)

// The customer records a saved search matches, as a query (columns service_id, external_id), or a
// 400 naming each field of the body at fault. The compiler takes it as a search for a page of one,
// which is never read.
export const matchQuery = async (tx: Tx, accountId: number, saved: SavedSearch) => {
  const body: SearchBody = { ...saved, limit: 1 }
  return compileMembers(
    searchInput(accountId, 'customer', body, await searchContext(tx, accountId, 'customer', body)),
  )
}

// Checked inside the transaction that stores it, with the account's customer property rows locked
// against deletion until it commits (catalog/properties.ts deletes a property only once no segment
// names it).
const checked = async (tx: Tx, accountId: number, body: SegmentBody) => {
  const { name, ...saved } = body
  await lockDefinitions(tx, accountId, 'customer')
  await matchQuery(tx, accountId, saved)
  return { name, saved }
}

// The count names the account itself: Citus routes a subquery by a constant, not by s's column.
const SEGMENT_COLUMNS = (sql: Sql | Tx, accountId: number) => sql`
  s.id, s.name, s.body, s.created_at, s.updated_at, s.computed_at,
  (select count(*)::int from segment_members m
   where m.account_id = ${accountId} and m.segment_id = s.id and m.exited_at is null) as members`

// The answer: the saved body's keys beside the segment's own.
const shown = (row: Record<string, unknown>) => {
  const { body, ...rest } = row
  return { id: rest.id, name: rest.name, ...(body as object), ...rest }
}

const nameTaken = (name: string) => (err: unknown) => {
  if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION)
    refuse(409, `A segment named ${JSON.stringify(name)} exists.`)
  throw err
}

export const readSegment = async (app: App, accountId: number, id: number) => {
  const [row] = await app.sql`
    select ${SEGMENT_COLUMNS(app.sql, accountId)} from segments s where s.account_id = ${accountId}
      and s.id = ${id}`
  return row ? shown(row) : refuse(404, `No segment ${id} in this account.`)
}

export const listSegments = async (app: App, accountId: number) =>
  (
    await app.sql`select ${SEGMENT_COLUMNS(app.sql, accountId)} from segments s
      where s.account_id = ${accountId} order by s.id`
  ).map(shown)

export const createSegment = async (app: App, accountId: number, body: SegmentBody) => {
  const id = await app.sql.begin(async (tx) => {
    const { name, saved } = await checked(tx, accountId, body)
    const [row] = await tx<{ id: number }[]>`insert into segments (account_id, name, body)
      values (${accountId}, ${name}, ${tx.json(saved)}) returning id`.catch(nameTaken(name))
    await addRecomputeSegments(tx, accountId)
    return row.id
  })
  return readSegment(app, accountId, id)
}

export const updateSegment = async (app: App, accountId: number, id: number, body: SegmentBody) => {
  await app.sql.begin(async (tx) => {
    const { name, saved } = await checked(tx, accountId, body)
    const [row] =
      await tx`update segments set name = ${name}, body = ${tx.json(saved)}, updated_at = now()
      where account_id = ${accountId} and id = ${id} returning id`.catch(nameTaken(name))
    if (!row) refuse(404, `No segment ${id} in this account.`)
    await addRecomputeSegments(tx, accountId)
  })
  return readSegment(app, accountId, id)
}

// A page of the segment's members: its saved search run now, paged as a customer search is, so
// that it answers exactly what the same body sent to customer search would.
export const searchMembers = async (
  app: App,
  accountId: number,
  id: number,
  page: PageBody,
  caller?: Caller,
) => {
  const [row] =
    await app.sql`select body from segments where account_id = ${accountId} and id = ${id}`
  if (!row) refuse(404, `No segment ${id} in this account.`)
  return searchPage(app, accountId, 'customer', { ...savedOf(row.body), ...page }, caller)
}

export const deleteSegment = async (app: App, accountId: number, id: number) => {
  const [row] =
    await app.sql`delete from segments where account_id = ${accountId} and id = ${id} returning id`
  if (!row) refuse(404, `No segment ${id} in this account.`)
}
