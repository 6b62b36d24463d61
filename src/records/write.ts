import { sourceOfTruth } from '../accounts/accounts.ts'
import * as v from 'valibot'
import { readCatalog } from '../catalog/properties.ts'
import { catalogOf, type Entity } from '../property.ts'
import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { takeXactLock } from '../db/locks.ts'
import { addCustomersChanged, addJobs, scoreRecordsJobs } from '../db/jobs.ts'
import { SQLSTATE, sqlState } from '../db/sqlstate.ts'
import type { Collection } from '../db/tables.ts'
import { today } from '../dates.ts'
import { refuse } from '../errors.ts'
import { processUpload } from '../uploads/process.ts'
import { checkUpload, insertUpload, requireApiSource } from '../uploads/receive.ts'
import {
  Attributes,
  type ContactItem,
  ContactOfCustomer,
  CustomerItem,
} from '../uploads/schemas.ts'
import { checkValues } from '../values.ts'
import { enqueueEvent } from '../webhooks/outbox.ts'
import { recordChurnEvents } from '../scoring/churn.ts'
import { DateString, strict, text255 } from '../validate.ts'
import { readRecord } from './read.ts'

// Single-record writes take the upload path in one transaction: the same checks, the same merge,
// the same webhook outbox and scoring job, committed before the answer.
// Creates of one external id wait for each other on an advisory lock, so the second finds the
// first's record (409). One an upload job inserts meanwhile breaks the unique external id: 409 too.
const createRecord = async (
  app: App,
  accountId: number,
  collection: Collection,
  item: CustomerItem | ContactItem,
) => {
  const checked = await checkUpload(app, accountId, collection, [item], 'API', () => '')
  const [field, externalId] =
    'contact_external_id' in item
      ? ['contact_external_id', item.contact_external_id]
      : ['external_id', item.external_id]
  const exists = () =>
    refuse(
      409,
      `${collection === 'customers' ? 'Customer' : 'Contact'} ${externalId} already exists.`,
      [{ path: `/${field}`, message: 'Already exists.' }],
    )
  await app.sql
    .begin(async (tx) => {
      await takeXactLock(tx, `create:${accountId}:${collection}:${externalId}`)
      const [found] = await tx`select 1 from ${tx(collection)} where account_id = ${accountId}
          and external_id = ${externalId}`
      if (found) exists()
      const [row] = await insertUpload(
        tx,
        accountId,
        collection,
        'API',
        checked.items,
        checked.dropped,
      )
      await processUpload(tx, accountId, row.id)
    })
    .catch((err) => (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION ? exists() : Promise.reject(err)))
}

export const createCustomer = async (app: App, accountId: number, item: CustomerItem) => {
  await createRecord(app, accountId, 'customers', item)
  return readRecord(app, accountId, 'customer', item.external_id)
}

// A contact of the customer its path names, which must exist (404) before the contact is checked.
export const createContact = async (
  app: App,
  accountId: number,
  customer: string,
  contact: v.InferOutput<typeof ContactCreate>,
) => {
  const [found] = await app.sql`select 1 from customers where account_id = ${accountId}
      and external_id = ${customer}`
  if (!found) refuse(404, `Customer ${customer} does not exist.`)
  await createRecord(app, accountId, 'contacts', { ...contact, customer_external_id: customer })
  return readRecord(app, accountId, 'contact', contact.contact_external_id, customer)
}

const requireApiAccount = async (sql: Sql, accountId: number) =>
  requireApiSource(await sourceOfTruth(sql, accountId))

export const CustomerPatch = strict({
  name: v.optional(text255),
  owner_email: v.optional(v.nullable(text255)),
  attributes: v.optional(Attributes),
  is_churned: v.optional(v.boolean()),
  churned_date: v.optional(v.nullable(DateString)),
})

export const ContactPatch = strict({
  contact_name: v.optional(text255),
  attributes: v.optional(Attributes),
})

// The create bodies of the single-record routes: the upload items, the contact's customer
// coming from the path.
export const CustomerCreate = CustomerItem
export const ContactCreate = ContactOfCustomer

const ownerId = async (tx: Tx, accountId: number, email: string | null | undefined) => {
  if (email === undefined) return undefined
  if (email === null) return null
  const [user] = await tx<{ id: number }[]>`
    select id from users where account_id = ${accountId} and lower(email) = lower(${email})`
  return user
    ? user.id
    : refuse(400, 'No user of the account has this email.', [
        { path: '/owner_email', message: `No user has the email ${email}.` },
      ])
}

// Churn set by hand is 'manual' so that the daily job never lifts it; false makes the
// customer active.
const churnColumns = (
  patch: CustomerChange,
): { is_churned?: boolean; churned_date?: string | null; churn_reason?: string | null } =>
  patch.is_churned === undefined
    ? {}
    : patch.is_churned
      ? { is_churned: true, churned_date: patch.churned_date ?? today(), churn_reason: 'manual' }
      : { is_churned: false, churned_date: null, churn_reason: null }

const typedAttributes = async (
  app: App,
  accountId: number,
  entity: Entity,
  attributes: v.InferOutput<typeof Attributes> | undefined,
) => {
  if (!attributes) return undefined
  const checked = checkValues(
    [{ attributes }],
    catalogOf(await readCatalog(app.sql, accountId, entity)),
    () => '',
  )
  if (checked.errors.length)
    refuse(400, 'Some values do not fit their property definitions.', checked.errors)
  return checked.items[0].attributes
}

type CustomerChange = v.InferOutput<typeof CustomerPatch>

// A PATCH: refused unless the API owns the account's records, its attributes checked against the
// catalog, then one transaction writes the record (`write` returns its id or refuses a 404) and
// rescores it; a changed customer also wakes the customers' follow-up job.
const patchRecord = async (
  app: App,
  accountId: number,
  entity: Entity,
  attributes: v.InferOutput<typeof Attributes> | undefined,
  write: (tx: Tx, typed: Awaited<ReturnType<typeof typedAttributes>>) => Promise<number>,
) => {
  await requireApiAccount(app.sql, accountId)
  const typed = await typedAttributes(app, accountId, entity, attributes)
  await app.sql.begin(async (tx) => {
    await addJobs(tx, scoreRecordsJobs(accountId, entity, [await write(tx, typed)]))
    if (entity === 'customer') await addCustomersChanged(tx, accountId)
  })
}

export const updateCustomer = async (
  app: App,
  accountId: number,
  externalId: string,
  patch: CustomerChange,
) => {
  await patchRecord(app, accountId, 'customer', patch.attributes, async (tx, attributes) => {
    const owner = await ownerId(tx, accountId, patch.owner_email)
    const churn = churnColumns(patch)
    // `was`: the row as it stood before, read in the same statement, for the churn
    // events and webhooks.
    const [row] = await tx`
      update customers c set
        name = coalesce(${patch.name ?? null}::text, c.name),
        owner_user_id = case when ${owner !== undefined} then ${owner ?? null}::bigint
          else c.owner_user_id end,
        is_churned = coalesce(${churn.is_churned ?? null}::boolean, c.is_churned),
        churned_date = case
          when ${churn.is_churned !== undefined} then ${churn.churned_date ?? null}::date
            else c.churned_date end,
        churn_reason = case
          when ${churn.is_churned !== undefined} then ${churn.churn_reason ?? null}::text
            else c.churn_reason end,
        attributes = jsonb_strip_nulls(c.attributes || ${tx.json(attributes ?? {})}),
          updated_at = now()
      from (select service_id, is_churned, to_char(churned_date, 'YYYY-MM-DD') as churned_date,
        churn_reason
        from customers where account_id = ${accountId}
          and external_id = ${externalId} for no key update) was
      where c.account_id = ${accountId} and c.service_id = was.service_id
      returning c.service_id, c.external_id, c.name, c.is_churned, was.is_churned as was_churned,
        was.churned_date as was_churned_date, c.churn_reason, was.churn_reason as was_reason`
    if (!row) refuse(404, `Customer ${externalId} does not exist.`)
    // The new date as the statement set it (not formatted in RETURNING, which Citus refuses).
    row.churned_date =
      churn.is_churned !== undefined ? (churn.churned_date ?? null) : row.was_churned_date
    const customer = { service_id: row.service_id, external_id: row.external_id, name: row.name }
    if (row.is_churned && !row.was_churned)
      await enqueueEvent(tx, accountId, 'customer.churned', [
        { ...customer, churned_date: row.churned_date, reason: 'manual' },
      ])
    if (!row.is_churned && row.was_churned)
      await enqueueEvent(tx, accountId, 'customer.reactivated', [
        { ...customer, churned_date: row.was_churned_date, reason: 'manual' },
      ])
    if (row.is_churned !== row.was_churned) {
      const reason = row.is_churned ? row.churn_reason : row.was_reason
      await recordChurnEvents(tx, accountId, [
        {
          service_id: row.service_id,
          churned: row.is_churned,
          churned_date: row.churned_date,
          reason,
        },
      ])
    }
    return row.service_id
  })
  return readRecord(app, accountId, 'customer', externalId)
}

export const updateContact = async (
  app: App,
  accountId: number,
  customerExternalId: string,
  externalId: string,
  patch: v.InferOutput<typeof ContactPatch>,
) => {
  await patchRecord(app, accountId, 'contact', patch.attributes, async (tx, attributes) => {
    const [row] = await tx`
      update contacts t set name = coalesce(${patch.contact_name ?? null}, t.name),
        attributes = jsonb_strip_nulls(t.attributes || ${tx.json(attributes ?? {})}),
          updated_at = now()
      from customers c
      where t.account_id = ${accountId} and t.external_id = ${externalId}
        and c.account_id = ${accountId} and c.service_id = t.customer_id
          and c.external_id = ${customerExternalId}
      returning t.service_id`
    if (!row) refuse(404, `Contact ${externalId} of customer ${customerExternalId} does not exist.`)
    return row.service_id
  })
  return readRecord(app, accountId, 'contact', externalId, customerExternalId)
}

export const deleteCustomer = async (app: App, accountId: number, externalId: string) => {
  await requireApiAccount(app.sql, accountId)
  await app.sql.begin(async (tx) => {
    const [row] =
      await tx`delete from customers where account_id = ${accountId} and external_id = ${externalId}
      returning service_id`
    if (!row) refuse(404, `Customer ${externalId} does not exist.`)
    await addCustomersChanged(tx, accountId)
  })
}

export const deleteContact = async (
  app: App,
  accountId: number,
  customerExternalId: string,
  externalId: string,
) => {
  await requireApiAccount(app.sql, accountId)
  const [row] = await app.sql`
    delete from contacts t using customers c
    where t.account_id = ${accountId} and t.external_id = ${externalId}
      and c.account_id = ${accountId} and c.service_id = t.customer_id
        and c.external_id = ${customerExternalId}
    returning t.service_id`
  if (!row) refuse(404, `Contact ${externalId} of customer ${customerExternalId} does not exist.`)
}
