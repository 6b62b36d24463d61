import type { InferOutput } from 'valibot'
import { fail } from '../http/errors.ts'
import { checkModelAgainstProperties, ScoringModelSchema } from '../scoring/model.ts'
import type { Sql } from '../db/client.ts'

type Model = InferOutput<typeof ScoringModelSchema>

// The model is checked against the account's properties: a rule on an undefined codename, or of
// a form that does not fit the property's type, is refused with its path.
export const putScoringModel = async (sql: Sql, accountId: number, model: Model) => {
  const defs = await sql`select entity, codename, type from property_defs where account_id = ${accountId}`
  const problems = checkModelAgainstProperties(model, defs as never)
  if (problems.length) fail(400, "The scoring model does not fit the account's properties.", problems)
  await sql`
    insert into scoring_models (account_id, model) values (${accountId}, ${sql.json(model as never)})
    on conflict (account_id) do update set model = excluded.model, updated_at = now()`
  return model
}

export const getScoringModel = async (sql: Sql, accountId: number) => {
  const [row] = await sql`select model from scoring_models where account_id = ${accountId}`
  return row ? row.model : fail(404, 'The account has no scoring model.')
}
