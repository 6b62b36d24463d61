import type { InferOutput } from 'valibot'
import { fail } from '../http/errors.ts'
import { addJobs, scoringQueue } from '../jobs/enqueue.ts'
import { checkModelAgainstProperties, ScoringModelSchema, type CatalogDef, type Entity, type ScoringModel } from '../scoring/model.ts'
import type { Sql, Tx } from '../db/client.ts'

type Model = InferOutput<typeof ScoringModelSchema>

// The whole account is rescored after a model change. The job key folds changes made while the
// rescoring still waits into one run.
export const rescoreAccountJobs = (accountId: number) => (['customer', 'contact'] as const).map((entity) => ({
  task: 'score_records', payload: { account_id: accountId, entity }, queue: scoringQueue(accountId),
  jobKey: `score_records:${accountId}:${entity}`,
}))

// The model is checked against the account's properties: a rule on an undefined codename, or of
// a form that does not fit the property's type, is refused with its path. It is stored together
// with the jobs that rescore the account under it.
export const putScoringModel = async (sql: Sql, accountId: number, model: Model) => {
  const defs = await sql`select entity, codename, type from property_defs where account_id = ${accountId}`
  const problems = checkModelAgainstProperties(model, defs as never)
  if (problems.length) fail(400, "The scoring model does not fit the account's properties.", problems)
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
  return row ? row.model : fail(404, 'The account has no scoring model.')
}

// What scoring an entity of the account needs: its model (null without one) and property catalog.
export const scoringInputs = async (sql: Sql | Tx, accountId: number, entity: Entity) => {
  const [row] = await sql`
    select (select model from scoring_models where account_id = ${accountId}) as model,
      (select coalesce(jsonb_agg(jsonb_build_object('codename', p.codename, 'kind', p.kind, 'type', p.type)), '[]')
       from property_defs p where p.account_id = ${accountId} and p.entity = ${entity}) as defs`
  return { model: row.model as ScoringModel | null, defs: row.defs as CatalogDef[] }
}
