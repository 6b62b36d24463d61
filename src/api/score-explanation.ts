import { scoringInputs } from '../admin/scoring.ts'
import { utcToday } from '../jobs/score-records.ts'
import { explainCustomer, type ExplainedCustomer } from '../scoring/explain-record.ts'
import type { Sql } from '../db/client.ts'

// The score_explanation field of GET /api/v1/customer/{external_id}; null when the customer is gone.
export const scoreExplanation = async (sql: Sql, accountId: number, externalId: string) => {
  const [row] = await sql`
    select c.attributes, c.metrics, to_char(h.last_seen, 'YYYY-MM-DD') as last_seen, s."values" as snapshot
    from customers c
      left join customer_scores h on h.account_id = c.account_id and h.customer_id = c.service_id
      left join customer_snapshots s on s.account_id = c.account_id and s.customer_id = c.service_id and s.date = h.last_seen
    where c.account_id = ${accountId} and c.external_id = ${externalId}`
  if (!row) return null
  const { model, defs } = await scoringInputs(sql, accountId, 'customer')
  return explainCustomer(model, defs, row as unknown as ExplainedCustomer, utcToday())
}
