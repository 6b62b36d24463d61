import { catalogSql } from '../catalog/properties.ts'
import { catalogOf, type PropertyDef } from '../property.ts'
import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { processUploadJobSql } from '../db/jobs.ts'
import { entityOf, type Collection } from '../db/tables.ts'
import { refuse } from '../errors.ts'
import { hasCustomerModel } from '../scoring/rules/model.ts'
import { pendingSql } from './lifecycle.ts'
import type { UploadItem } from './schemas.ts'
import { checkValues, type Dropped, droppedKeyNames } from '../values.ts'
import { foldItems } from './fold.ts'

// Everything the checks need, in one round trip. Each table is filtered by the bound account id
// (not joined on a.id), so that Citus routes the statement to the account's shard.
const accountState = (app: App, accountId: number, collection: Collection) => app.sql`
  select a.source_of_truth, m.model,
    (select count(*)::int from uploads u where u.account_id = ${accountId}
      and ${pendingSql(app.sql)}) as pending,
    ${catalogSql(app.sql, accountId, entityOf(collection))} as defs
  from accounts a left join scoring_models m on m.account_id = ${accountId}
    where a.id = ${accountId}`

// The upload row, its items folded into one record each (fold.ts). A single-record create and a
// CSV chunk write it and process it in the caller's transaction, so the records exist (and their
// webhooks and scoring are enqueued) at commit.
export const insertUpload = (
  sql: Sql | Tx,
  accountId: number,
  collection: Collection,
  source: string,
  items: UploadItem[],
  dropped: Dropped,
) => sql`
  insert into uploads (account_id, kind, source, items, item_count, dropped_keys, dropped_key_names)
  values (${accountId}, ${collection}, ${source}, ${sql.json(foldItems(collection, items))},
    ${items.length},
    ${dropped.count},
    ${sql.json(droppedKeyNames(dropped))})
  returning id`

// The upload row and its processing job are written by one statement: a 200 means both are
// committed, and a rollback leaves neither. Jobs of one account share a queue, so its uploads are
// processed one at a time in the order received.
const store = (
  app: App,
  accountId: number,
  collection: Collection,
  source: string,
  items: UploadItem[],
  dropped: Dropped,
) => app.sql`
  with u as (${insertUpload(app.sql, accountId, collection, source, items, dropped)})
  select u.id, ${processUploadJobSql(app.sql, accountId, app.sql`u.id`)} as job from u`

// Records owned by a file import or an integration are not written through the API.
export const requireApiSource = (sourceOfTruth: string | undefined) => {
  if (sourceOfTruth !== 'API')
    refuse(
      406,
      `Records of this account are owned by its source of truth ${sourceOfTruth}, not the API.`,
    )
}

// The checks every write of records passes: source of truth (406), scoring model (490), typed
// values against the account's definitions (400), and the backlog of unprocessed uploads (429).
export const checkUpload = async <T extends UploadItem>(
  app: App,
  accountId: number,
  collection: Collection,
  items: T[],
  source: string,
  itemPath = (i: number) => `/${collection}/${i}`,
) => {
  const [state] = await accountState(app, accountId, collection)
  if (source === 'API') requireApiSource(state.source_of_truth)
  if (collection === 'customers' && !(state.model && hasCustomerModel(state.model))) {
    refuse(
      490,
      'The account has no customer scoring model; set one with PUT /admin/v1/accounts/{id}/scoring.',
    )
  }
  const catalog = catalogOf(state.defs as PropertyDef[])
  const checked = checkValues(items, catalog, itemPath)
  if (checked.errors.length)
    refuse(400, 'Some values do not fit their property definitions.', checked.errors)
  if (state.pending >= app.config.maxPendingUploads) {
    refuse(
      429,
      `The account already has ${state.pending} uploads waiting to be processed.`,
      undefined,
      {
        'retry-after': '5',
      },
    )
  }
  return { ...checked, catalog }
}

export const receiveUpload = async (
  app: App,
  accountId: number,
  collection: Collection,
  items: UploadItem[],
  source = 'API',
) => {
  const checked = await checkUpload(app, accountId, collection, items, source)
  const [row] = await store(app, accountId, collection, source, checked.items, checked.dropped)
  return { upload_id: row.id as number, status: 'received' as const, items: items.length }
}
