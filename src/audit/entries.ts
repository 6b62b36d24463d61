import * as v from 'valibot'
import type { Sql, Tx } from '../db/client.ts'
import { sqlState, SQLSTATE } from '../db/sqlstate.ts'
import type { Actor } from '../route.ts'
import { describe, id, int, limitParam, Timestamp } from '../validate.ts'

// The audit log (sql/049): who changed what, on what, when, from where, with what status. The
// entries are written by the edge (http/audit.ts), in the change's transaction; this file holds
// their SQL and their answer's shape.

const ACTOR_TYPES = ['user', 'key', 'operator'] as const

// One change as recorded. accountId null: an operator's change that names no account.
export interface Change {
  accountId: number | null
  actor: Actor
  action: string
  target: string[]
  status: number
  address: string | null
}

const values = (
  sql: Sql | Tx,
  c: Change,
) => sql`${c.actor.type}, ${c.actor.id}, ${c.actor.name}, ${c.action},
  ${c.target}::text[], ${c.status}, ${c.address}::inet`

const recordOperator = (sql: Sql | Tx, c: Change) => sql`
  insert into operator_audit_entries (actor_type, actor_id, actor_name, action, target, status,
    address)
  values (${values(sql, c)})`

const recordTenant = (sql: Sql | Tx, accountId: number, c: Change) => sql`
  insert into audit_entries (account_id, actor_type, actor_id, actor_name, action, target, status,
    address)
  values (${accountId}, ${values(sql, c)})`

export const recordChange = (sql: Sql | Tx, c: Change) =>
  c.accountId === null ? recordOperator(sql, c) : recordTenant(sql, c.accountId, c)

// A refused change, after its transaction rolled back. The operator may name an account that does
// not exist (a 404): that refusal names no account, and goes with the operator's own entries.
export const recordRefusal = (sql: Sql, c: Change) =>
  recordChange(sql, c).catch((err) =>
    sqlState(err) === SQLSTATE.FOREIGN_KEY_VIOLATION ? recordOperator(sql, c) : Promise.reject(err),
  )

// A removed user's entries keep what they did, and their id, but no longer their name or email
// (people/users.ts removeUser): the actor's name is blanked, and shown as an erasure's
// segments are.
export const forgetUser = (sql: Sql | Tx, accountId: number, userId: number) =>
  sql`update audit_entries set actor_name = null
    where account_id = ${accountId} and actor_type = 'user' and actor_id = ${userId}`

// A blanked segment (an erasure's) in a target as the API shows it.
const ERASED = '(erased)'

const AuditEntry = v.object({
  id,
  at: Timestamp,
  actor: describe(
    v.object({
      type: v.picklist(ACTOR_TYPES),
      id: describe(v.nullable(int), "The key's or the user's id; null for the operator."),
      name: describe(
        v.nullable(v.string()),
        "The key's name, the user's name or email, or `operator`, as they were then; a removed user's reads " +
          `\`${ERASED}\`.`,
      ),
    }),
    'Who made the change: a service key, a signed-in user, or the operator (the admin token or the CLI).',
  ),
  action: describe(v.string(), "The route's OpenAPI operationId, such as `revokeKey`."),
  target: describe(
    v.string(),
    'What it changed: the path below its version prefix (`customer/acme-1`, `accounts/7/keys/3`), with the id of ' +
      `what a creation made; a segment that named an erased customer or contact reads \`${ERASED}\`.`,
  ),
  status: describe(
    int,
    'The HTTP status answered: 2xx for a change made, 4xx for one refused (nothing changed).',
  ),
  address: describe(
    v.nullable(v.string()),
    "The client's address as the server saw it; null from the CLI.",
  ),
})

export const AuditPage = v.object({
  entries: v.array(AuditEntry),
  paging: describe(
    v.optional(v.object({ next: v.object({ after: int }) })),
    'Present when there is a next page: send `after` back as ?after= to get it.',
  ),
})

export const AuditQuery = {
  limit: limitParam(100, 1000),
  after: {
    description: 'paging.next.after of the page before.',
    schema: v.pipe(v.number(), v.safeInteger()),
  },
}
type Paging = { limit: number; after?: number }

const columns = (sql: Sql) =>
  sql`id, at, actor_type, actor_id, actor_name, action, to_json(target) as target, status,
    host(address) as address`

type Entry = {
  id: number
  at: Date
  actor_type: string
  actor_id: number | null
  actor_name: string | null
  action: string
  target: (string | null)[]
  status: number
  address: string | null
}

const page = (rows: Entry[], limit: number) => ({
  entries: rows.slice(0, limit).map((r) => ({
    id: r.id,
    at: r.at.toISOString(),
    actor: {
      type: r.actor_type,
      id: r.actor_id,
      // A user's name is blanked when the user is removed (forgetUser).
      name: r.actor_type === 'user' && r.actor_name === null ? ERASED : r.actor_name,
    },
    action: r.action,
    target: r.target.map((s) => (s === null ? ERASED : encodeURIComponent(s))).join('/'),
    status: r.status,
    address: r.address,
  })),
  ...(rows.length > limit && { paging: { next: { after: rows[limit - 1].id } } }),
})

// The account's entries, newest first.
export const listEntries = async (sql: Sql, accountId: number, { limit, after }: Paging) =>
  page(
    await sql<Entry[]>`select ${columns(sql)} from audit_entries
      where account_id = ${accountId} and id < ${after ?? Number.MAX_SAFE_INTEGER}
      order by id desc limit ${limit + 1}`,
    limit,
  )

// The operator's entries that name no account, newest first.
export const listOperatorEntries = async (sql: Sql, { limit, after }: Paging) =>
  page(
    await sql<Entry[]>`select ${columns(sql)} from operator_audit_entries
      where id < ${after ?? Number.MAX_SAFE_INTEGER} order by id desc limit ${limit + 1}`,
    limit,
  )
