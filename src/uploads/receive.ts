import { fail } from '../http/errors.ts'
import { hasCustomerModel } from '../scoring/model.ts'
import { checkValues, type Catalog, type Def } from './typecheck.ts'
import type { App } from '../http/types.ts'
import type { Tx } from '../db/client.ts'
import type { ContactItem, CustomerItem } from './schemas.ts'

export type UploadKind = 'customers' | 'contacts'
export const entityOf = (kind: UploadKind) => (kind === 'customers' ? 'customer' : 'contact')

// Everything the checks need, in one round trip.
const accountState = (app: App, accountId: number, kind: UploadKind) => app.sql`
  select a.source_of_truth, m.model,
    (select count(*)::int from uploads u where u.account_id = a.id and u.status in ('received', 'processing')) as pending,
    (select coalesce(json_agg(json_build_array(codename, kind, type)), '[]') from property_defs p
      where p.account_id = a.id and p.entity = ${entityOf(kind)}) as defs
  from accounts a left join scoring_models m on m.account_id = a.id where a.id = ${accountId}`

// The upload row and its processing job are written by one statement: a 200 means both are
// committed, and a rollback leaves neither. Jobs of one account share a queue, so its uploads are
// processed one at a time in the order received.
const store = (app: App, accountId: number, kind: UploadKind, source: string, items: unknown[], droppedKeys: number) => app.sql`
  with u as (
    insert into uploads (account_id, kind, source, items, item_count, dropped_keys)
    values (${accountId}, ${kind}, ${source}, ${app.sql.json(items as never)}, ${items.length}, ${droppedKeys})
    returning id
  )
  select u.id, graphile_worker.add_job('process_upload',
    json_build_object('account_id', ${accountId}::bigint, 'upload_id', u.id),
    queue_name => 'account:' || ${accountId}::text) as job
  from u`

// SPEC section 2: records owned by a file import or an integration are not written through the API.
export const requireApiSource = (sourceOfTruth: string) => {
  if (sourceOfTruth !== 'API') fail(406, `Records of this account are owned by its source of truth ${sourceOfTruth}, not the API.`)
}

// The checks every write of records passes: source of truth (406), scoring model (490), typed
// values against the account's definitions (400), and the backlog of unprocessed uploads (429).
export const checkUpload = async <T extends CustomerItem | ContactItem>(
  app: App, accountId: number, kind: UploadKind, items: T[], source: string,
  itemPath = (i: number) => `/${kind}/${i}`,
) => {
  const [state] = await accountState(app, accountId, kind)
  if (source === 'API') requireApiSource(state.source_of_truth)
  if (kind === 'customers' && !(state.model && hasCustomerModel(state.model))) {
    fail(490, 'The account has no customer scoring model; set one with PUT /admin/v1/accounts/{id}/scoring.')
  }
  const catalog: Catalog = new Map((state.defs as [string, Def['kind'], Def['type']][]).map(([c, kind, type]) => [c, { kind, type }]))
  const checked = checkValues(items, catalog, itemPath)
  if (checked.errors.length) fail(400, 'Some values do not fit their property definitions.', checked.errors)
  if (state.pending >= app.config.maxPendingUploads) {
    fail(429, `The account already has ${state.pending} uploads waiting to be processed.`, undefined, { 'retry-after': '5' })
  }
  return { ...checked, catalog }
}

export const receiveUpload = async (
  app: App, accountId: number, kind: UploadKind, items: (CustomerItem | ContactItem)[], source = 'API',
) => {
  const checked = await checkUpload(app, accountId, kind, items, source)
  const [row] = await store(app, accountId, kind, source, checked.items, checked.droppedKeys)
  return { upload_id: row.id as number, status: 'received' as const, items: items.length }
}

// A single-record create: the upload row is written and processed in the caller's transaction,
// so the record exists (and its webhook and scoring are enqueued) when the transaction commits.
export const insertUploadRow = (tx: Tx, accountId: number, kind: UploadKind, source: string, items: unknown[], droppedKeys: number) => tx`
  insert into uploads (account_id, kind, source, items, item_count, dropped_keys)
  values (${accountId}, ${kind}, ${source}, ${tx.json(items as never)}, ${items.length}, ${droppedKeys})
  returning id`
