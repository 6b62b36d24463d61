import { readCatalog } from '../admin/properties.ts'
import { scoringInputs } from '../admin/scoring.ts'
import type { Entity } from '../catalog.ts'
import type { App } from '../context.ts'
import { today } from '../dates.ts'
import { refuse } from '../errors.ts'
import { explainCustomer, type ExplainedCustomer } from '../scoring/explain.ts'
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
  if (!row || (customerExternalId !== undefined && row.customer_external_id !== customerExternalId)) {
    return refuse(
      404,
      entity === 'customer'
        ? `Customer ${externalId} does not exist.`
        : `Contact ${externalId} of customer ${customerExternalId} does not exist.`,
    )
  }
  return row
}

// The score_explanation field of GET /api/v1/customer/{external_id}; null when the customer is gone.
export const scoreExplanation = async (app: App, accountId: number, externalId: string) => {
  const [row] = await app.sql`
    select c.attributes, c.metrics, to_char(h.last_seen, 'YYYY-MM-DD') as last_seen, s."values" as snapshot
    from customers c
      left join customer_scores h on h.account_id = c.account_id and h.customer_id = c.service_id
      left join customer_snapshots s on s.account_id = c.account_id and s.customer_id = c.service_id
        and s.date = h.last_seen
    where c.account_id = ${accountId} and c.external_id = ${externalId}`
  if (!row) return null
  const { model, defs } = await scoringInputs(app.sql, accountId, 'customer')
  return explainCustomer(model, defs, row as unknown as ExplainedCustomer, today())
}
