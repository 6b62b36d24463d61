import type { InferOutput } from 'valibot'
import type { Entity } from '../catalog.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addJobs, rescoreAccountJobs } from '../db/jobs.ts'
import { refuse } from '../errors.ts'
import type { ScoreAlerts } from '../scoring/alerts.ts'
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

// Setting alerts rescores the account's customers, which records each one's contributions: the
// "before" of the first change to announce. Clearing them ({}) forgets the contributions.
export const putScoreAlerts = (sql: Sql, accountId: number, alerts: ScoreAlerts) =>
  sql.begin(async (tx) => {
    const set = Object.keys(alerts).length > 0
    await tx`update accounts set score_alerts = ${set ? tx.json(alerts as never) : null} where id = ${accountId}`
    if (set)
      await addJobs(
        tx,
        rescoreAccountJobs(accountId).filter((job) => job.payload.entity === 'customer'),
      )
    else await tx`delete from customer_contributions where account_id = ${accountId}`
    return alerts
  })

export const getScoreAlerts = async (sql: Sql, accountId: number) =>
  ((await sql`select score_alerts from accounts where id = ${accountId}`)[0]?.score_alerts ?? {}) as ScoreAlerts
