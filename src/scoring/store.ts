import { catalogSql, readCatalog } from '../catalog/properties.ts'
import type { Entity } from '../property.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addJobs, rescoreAccountJobs } from '../db/jobs.ts'
import { refuse } from '../errors.ts'
import type { ScoreAlerts } from './rules/alerts.ts'
import { checkModelAgainstProperties, type ScoringModel } from './rules/model.ts'

// The scoring model and score alerts an account has stored, and what storing them sets off.

// The model is checked against the account's properties: a rule on an undefined codename, or of
// a form that does not fit the property's type, is refused with its path (below `at`, where the
// model sits in the request body). Resolves to the account's customer properties.
export const checkModel = async (sql: Sql, accountId: number, model: ScoringModel, at = '') => {
  const catalogs = {
    customer: await readCatalog(sql, accountId, 'customer'),
    contact: await readCatalog(sql, accountId, 'contact'),
  }
  const problems = checkModelAgainstProperties(model, catalogs).map((p) => ({
    ...p,
    path: at + p.path,
  }))
  if (problems.length)
    refuse(400, "The scoring model does not fit the account's properties.", problems)
  return catalogs.customer
}

// The stored model, locked: a change made meanwhile by another request is compared with, not
// overlooked.
const lockModel = (tx: Tx, accountId: number) =>
  tx`select model from scoring_models where account_id = ${accountId} for update`

// Stores the model. The time comes through excluded: Citus evaluates now() in VALUES but refuses
// it in DO UPDATE SET.
const storeModel = (tx: Tx, accountId: number, model: ScoringModel) => tx`
  insert into scoring_models (account_id, model, updated_at)
    values (${accountId}, ${tx.json(model)}, now())
  on conflict (account_id) do update set model = excluded.model, updated_at = excluded.updated_at`

// The entities whose engagement rules are those of `old` (compared as jsonb, so key order aside;
// none without an old model). A statement of its own: Citus allows no subquery in an INSERT.
const unchangedEngagement = (tx: Tx, model: ScoringModel, old: ScoringModel | undefined) => tx`
  select array(
    select e from unnest(array['customer', 'contact']) e
    where ${old === undefined ? null : tx.json(old)}::jsonb -> e -> 'engagement'
      = ${tx.json(model)}::jsonb -> e -> 'engagement'
  ) as unchanged`

// A checked model is stored together with the jobs that rescore the account under it. Where its
// engagement rules are those of the model before (a change to fit or churn), the snapshots' scores
// still hold: the rescoring keeps the stored histories, at the cost of the daily run.
export const putScoringModel = async (sql: Sql, accountId: number, model: ScoringModel) => {
  await checkModel(sql, accountId, model)
  await sql.begin(async (tx) => {
    const [old] = await lockModel(tx, accountId)
    await storeModel(tx, accountId, model)
    const [{ unchanged }] = await unchangedEngagement(tx, model, old?.model)
    await addJobs(tx, rescoreAccountJobs(accountId, unchanged))
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
    await tx`update accounts set score_alerts = ${set ? tx.json(alerts) : null}
      where id = ${accountId}`
    if (set)
      await addJobs(
        tx,
        rescoreAccountJobs(accountId).filter((job) => job.payload.entity === 'customer'),
      )
    else await tx`delete from customer_contributions where account_id = ${accountId}`
    return alerts
  })

export const getScoreAlerts = async (sql: Sql, accountId: number) =>
  ((await sql`select score_alerts from accounts where id = ${accountId}`)[0]?.score_alerts ??
    {}) as ScoreAlerts
