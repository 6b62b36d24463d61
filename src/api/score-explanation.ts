import { scoringInputs } from '../admin/scoring.ts'
import { utcToday } from '../jobs/score-records.ts'
import { explainCustomer, type ExplainedCustomer } from '../scoring/explain-record.ts'
import type { Sql } from '../db/client.ts'

// The score_explanation field of GET /api/v1/customer/{external_id}; null when the customer is gone.
export const scoreExplanation = async (sql: Sql, accountId: number, externalId: string) => {
  const [row] = await sql`
    select attributes, metrics, to_char(last_seen, 'YYYY-MM-DD') as last_seen
    from customers where account_id = ${accountId} and external_id = ${externalId}`
  if (!row) return null
  const { model, defs } = await scoringInputs(sql, accountId, 'customer')
  return explainCustomer(model, defs, row as unknown as ExplainedCustomer, utcToday())
}
