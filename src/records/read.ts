import { readCatalog, readLabels } from '../catalog/properties.ts'
import { churnDrivers } from '../churn/train.ts'
import { scoringInputs } from '../scoring/store.ts'
import type { Entity } from '../property.ts'
import type { App } from '../context.ts'
import { today } from '../dates.ts'
import { refuse } from '../errors.ts'
import { explanationRows } from '../scoring/changes.ts'
import { explainCustomer, labelled, labelledExplanation } from '../scoring/rules/explain.ts'
import { compileSearch } from '../search/sql.ts'

// One record as the search endpoints show it (churned customers included); a contact is found
// under its customer only.
export const readRecord = async (
  app: App,
  accountId: number,
  entity: Entity,
  externalId: string,
  customerExternalId?: string,
) => {
  const query = compileSearch({
    entity,
    accountId,
    catalog: await readCatalog(app.sql, accountId, entity),
    limit: 1,
    externalId,
    today: today(),
    filters: entity === 'customer' ? [{ propertyName: 'is_churned', operator: 'KNOWN' }] : [],
  })
  const [row] = await app.sql.unsafe(query.text, query.params as string[])
  if (
    !row ||
    (customerExternalId !== undefined && row.customer_external_id !== customerExternalId)
  ) {
    return refuse(
      404,
      entity === 'customer'
        ? `Customer ${externalId} does not exist.`
        : `Contact ${externalId} of customer ${customerExternalId} does not exist.`,
    )
  }
  return row
}

// The score_explanation field of GET /api/v1/customer/{external_id}; null when the
// customer is gone.
const scoreExplanation = async (app: App, accountId: number, externalId: string) => {
  const [row] = await explanationRows(app.sql, accountId, app.sql`c.external_id = ${externalId}`)
  if (!row) return null
  const [{ model, defs }, labels] = await Promise.all([
    scoringInputs(app.sql, accountId, 'customer'),
    readLabels(app.sql, accountId, 'customer'),
  ])
  return {
    ...labelledExplanation(explainCustomer(model, defs, row, today()), labels),
    change_drivers: labelled(row.change_drivers, labels),
  }
}

// A customer with why its scores are what they are (GET /api/v1/customer/{external_id}).
export const readExplainedCustomer = async (app: App, accountId: number, externalId: string) => ({
  ...(await readRecord(app, accountId, 'customer', externalId)),
  score_explanation: await scoreExplanation(app, accountId, externalId),
  churn_drivers: await churnDrivers(app.sql, accountId, externalId),
})
