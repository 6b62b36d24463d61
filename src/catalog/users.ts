import * as v from 'valibot'
import type { Sql } from '../db/client.ts'
import { id, storable, strict } from '../validate.ts'
import { alreadyExists } from './exists.ts'

export const UserBody = strict({
  email: v.pipe(v.string(), v.trim(), v.email(), v.maxLength(255), storable),
  name: v.optional(v.pipe(v.string(), v.maxLength(255), storable)),
})

export const User = v.object({ id, email: v.string(), name: v.nullable(v.string()) })

export const addUser = async (sql: Sql, accountId: number, body: v.InferOutput<typeof UserBody>) =>
  (
    await sql`
    insert into users (account_id, email, name) values (${accountId}, ${body.email}, ${body.name ?? null})
    returning id, email, name`.catch(alreadyExists(`A user with email ${body.email}`))
  )[0]

export const listUsers = (sql: Sql, accountId: number) =>
  sql`select id, email, name from users where account_id = ${accountId} order by id`
