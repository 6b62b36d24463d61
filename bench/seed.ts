// What the benches write straight into the tables, with no HTTP, validation or job in the way.
import type { Writable } from 'node:stream'
import type { Sql } from '../src/db/client.ts'

// An account and the definitions of its customers' attributes ([codename, type]) and metrics
// (numbers): its id.
export const seedAccount = async (
  sql: Sql,
  name: string,
  attributes: readonly (readonly [string, string])[] = [],
  metrics: readonly string[] = [],
) => {
  const [account] = await sql`
    insert into accounts (name, tracker_key) values (${name}, ${`CS-${name.toUpperCase()}`})
      returning id`
  const defs = [
    ...attributes.map(([codename, type]) => ({ kind: 'attribute', codename, type })),
    ...metrics.map((codename) => ({ kind: 'metric', codename, type: 'number' })),
  ]
  if (defs.length)
    await sql`insert into property_defs ${sql(
      defs.map((d) => ({ account_id: account.id, entity: 'customer', ...d })),
    )} on conflict do nothing`
  return account.id as number
}

// COPY ... FROM STDIN of `lines` (each ending in a newline), waiting whenever the stream's
// buffer is full.
export const copyLines = async (query: Promise<Writable>, lines: Iterable<string>) => {
  const stream = await query
  for (const line of lines)
    if (!stream.write(line)) await new Promise((r) => stream.once('drain', r))
  await new Promise((resolve, reject) =>
    stream.end((err?: Error) => (err ? reject(err) : resolve(undefined))),
  )
}

// A JSON value as a field of COPY's text format, whose escape character is the backslash.
export const copyJson = (json: unknown) => JSON.stringify(json).replace(/\\/g, '\\\\')
