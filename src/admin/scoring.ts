import type { InferOutput } from 'valibot'
import type { Entity } from '../catalog.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addJobs, rescoreAccountJobs } from '../db/jobs.ts'
import { refuse } from '../errors.ts'
import { checkModelAgainstProperties, type ScoringModel, ScoringModelSchema } from '../scoring/model.ts'
import { catalogSql, readCatalog } from './properties.ts'

type Model = InferOutput<typeof ScoringModelSchema>

// The model is checked against the account's properties: a rule on an undefined codename, or of
// a form that does not fit the property's type, is refused with its path. It is stored together
// with the jobs that rescore the account under it.
export const putScoringModel = async (sql: Sql, accountId: number, model: Model) => {
  const catalogs = {
    customer: await readCatalog(sql, accountId, 'customer'),
    contact: await readCatalog(sql, accountId, 'contact'),
  }
  const problems = checkModelAgainstProperties(model, catalogs)
  if (problems.length) refuse(400, "The scoring model does not fit the account's properties.", problems)
  await sql.begin(async (tx) => {
    await tx`
      insert into scoring_models (account_id, model) values (${accountId}, ${tx.json(model as never)})
      on conflict (account_id) do update set model = excluded.model, updated_at = now()`
    await addJobs(tx, rescoreAccountJobs(accountId))
  })
  return model
}

export const getScoringModel = async (sql: Sql, accountId: number) => {
  const [row] = await sql`select model from scoring_models where account_id = ${accountId}`
  return row ? row.model : refuse(404, 'The account has no scoring model.')
}

// What scoring an entity of the account needs: its model (null without one) and property catalog.
export const scoringInputs = async (sql: Sql | Tx, accountId: number, entity: Entity) => {
  const [row] = await sql`
    select (select model from scoring_models where account_id = ${accountId}) as model,
      ${catalogSql(sql, accountId, entity)} as defs`
  return { model: row.model as ScoringModel | null, defs: row.defs }
}
