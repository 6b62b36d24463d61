import { randomBytes } from 'node:crypto'
import * as v from 'valibot'
import { refuse } from '../errors.ts'
import { DEFAULT_SCOPES, hashToken, SCOPES } from '../db/key-check.ts'
import type { Sql } from '../db/client.ts'
import { describe, id, storable, strict, Timestamp } from '../validate.ts'

export const CreateKeyBody = strict({
  name: v.optional(v.pipe(v.string(), v.maxLength(255), storable)),
  scopes: v.optional(v.pipe(v.array(v.picklist(SCOPES)), v.minLength(1)), DEFAULT_SCOPES),
})

export const Key = v.object({
  id,
  name: v.nullable(v.string()),
  scopes: v.array(v.picklist(SCOPES)),
  created_at: Timestamp,
  revoked_at: v.nullable(Timestamp),
})
export const NewKey = v.object({
  ...v.omit(Key, ['revoked_at']).entries,
  token: describe(v.string(), 'The key to send in the service-key header; shown only here.'),
})

// The token is shown once; only its SHA-256 is stored.
export const createKey = async (
  sql: Sql,
  accountId: number,
  body: v.InferOutput<typeof CreateKeyBody>,
) => {
  const token = `sk_${accountId}_${randomBytes(32).toString('base64url')}`
  const [key] = await sql`
    insert into api_keys (account_id, name, scopes, token_hash)
    values (${accountId}, ${body.name ?? null}, ${[...new Set(body.scopes)]}, ${hashToken(token)})
    returning id, name, scopes, created_at`
  return { ...key, token }
}

export const listKeys = (sql: Sql, accountId: number) => sql`
  select id, name, scopes, created_at, revoked_at from api_keys where account_id = ${accountId}
    order by id`

// A key revoked before keeps its time (least() passes over a null). Not coalesce(): Citus refuses a
// non-immutable function inside coalesce or case in an UPDATE of a distributed table.
export const revokeKey = async (sql: Sql, accountId: number, keyId: number) => {
  const [key] = await sql`
    update api_keys set revoked_at = least(revoked_at, now())
    where account_id = ${accountId} and id = ${keyId} returning id`
  if (!key) refuse(404, `Key ${keyId} does not exist.`)
}
