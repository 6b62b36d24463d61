import { randomBytes } from 'node:crypto'
import * as v from 'valibot'
import type { App } from '../context.ts'
import { refuse } from '../errors.ts'
import { idParam, type Req } from '../route.ts'
import { SYSTEM_ATTRIBUTES } from '../property.ts'
import type { Sql, Tx } from '../db/client.ts'
import { describe, id, storable, strict, Timestamp } from '../validate.ts'

// The admin routes of an account and of what it holds start here.
export const ACCOUNTS = '/admin/v1/accounts'

const SourceOfTruth = v.pipe(
  v.string(),
  v.regex(/^[A-Z][A-Z0-9_]{1,31}$/, 'Must be API, FILE or an uppercase integration id.'),
  v.description('API, FILE or the uppercase id of the integration that owns the records.'),
  v.metadata({ examples: ['API', 'FILE'] }),
)

const AccountName = v.pipe(v.string(), v.trim(), v.minLength(1), v.maxLength(255), storable)

export const CreateAccountBody = strict({
  name: AccountName,
  source_of_truth: v.optional(SourceOfTruth, 'API'),
})

// A rename, or a new source of truth (e.g. API -> FILE before imports take over the records).
export const UpdateAccountBody = v.pipe(
  strict({ name: v.optional(AccountName), source_of_truth: v.optional(SourceOfTruth) }),
  v.check(
    (b) => b.name !== undefined || b.source_of_truth !== undefined,
    'Give name, source_of_truth or both.',
  ),
  v.metadata({ minProperties: 1 }),
)

export const TrackingBody = strict({
  domains: v.pipe(
    v.array(
      v.pipe(
        v.string(),
        v.toLowerCase(),
        v.regex(
          /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
          'Must be a domain name.',
        ),
      ),
    ),
    v.maxLength(100),
  ),
})

export const Account = v.object({
  id,
  name: v.string(),
  source_of_truth: SourceOfTruth,
  tracker_key: describe(v.string(), 'The public key tracking requests carry in `trackerKey`.'),
  tracking_domains: v.array(v.string()),
  created_at: Timestamp,
})

// What a service key reads of its own account: the name people know it by (GET /api/v1/account).
export const KeyAccount = v.object({ id, name: v.string() })

const ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789'
const trackerKey = () => 'CS-' + [...randomBytes(8)].map((b) => ALPHABET[b % 32]).join('')

const columns = (sql: Sql | Tx) =>
  sql`id, name, source_of_truth, tracker_key, tracking_domains, created_at`

export const createAccount = (sql: Sql, body: v.InferOutput<typeof CreateAccountBody>) =>
  sql.begin(async (tx) => {
    const [account] = await tx`
      insert into accounts (name, source_of_truth, tracker_key)
      values (${body.name}, ${body.source_of_truth}, ${trackerKey()}) returning ${columns(tx)}`
    // The system attributes are catalog rows (catalog/properties.ts), written here in the account's
    // own transaction: catalog/ imports accounts/ (accountIn), so accounts/ cannot
    // call back into it.
    await tx`insert into property_defs ${tx(
      SYSTEM_ATTRIBUTES.map((a) => ({
        account_id: account.id,
        entity: 'customer',
        kind: 'attribute',
        system: true,
        ...a,
      })),
    )}`
    return account
  })

export const getAccount = async (sql: Sql, id: number) => {
  const [account] = await sql`select ${columns(sql)} from accounts where id = ${id}`
  return account ?? refuse(404, `Account ${id} does not exist.`)
}

// The account an admin route under /admin/v1/accounts/:id names, once it is known to exist (404).
export const accountIn = async (req: Req, app: App) =>
  (await getAccount(app.sql, idParam(req, 'id'))).id as number

// The operator's list: every account, for the admin token that spans them all.
export const listAccounts = (sql: Sql) => sql`select ${columns(sql)} from accounts order by id`

export const accountExists = async (sql: Sql, id: number) =>
  (await sql`select 1 from accounts where id = ${id}`).length > 0

// Who owns the account's records (API, FILE or an integration); undefined for no such account.
export const sourceOfTruth = async (sql: Sql, id: number) =>
  (
    await sql<{ source_of_truth: string }[]>`select source_of_truth from accounts where id = ${id}`
  )[0]?.source_of_truth

export const anyAccount = async (sql: Sql) => (await sql`select 1 from accounts limit 1`).length > 0

export const updateAccount = async (
  sql: Sql,
  id: number,
  body: v.InferOutput<typeof UpdateAccountBody>,
) => {
  const [account] = await sql`
    update accounts set name = coalesce(${body.name ?? null}, name),
      source_of_truth = coalesce(${body.source_of_truth ?? null}, source_of_truth)
    where id = ${id} returning ${columns(sql)}`
  return account ?? refuse(404, `Account ${id} does not exist.`)
}

export const setTrackingDomains = async (sql: Sql, id: number, domains: string[]) => {
  const [account] = await sql`
    update accounts set tracking_domains = ${[...new Set(domains)]} where id = ${id}
      returning ${columns(sql)}`
  return account ?? refuse(404, `Account ${id} does not exist.`)
}
