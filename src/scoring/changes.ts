import type { PropertyDef } from '../property.ts'
import type { Sql, Tx } from '../db/client.ts'
import { enqueueEvent } from '../webhooks/outbox.ts'
import {
  ALERT_SCORES,
  type ChangeDriver,
  type ScoreAlerts,
  type Scores,
  scoreChanges,
} from './rules/alerts.ts'
import { explainCustomer, type ExplainedCustomer } from './rules/explain.ts'
import type { ScoringModel } from './rules/model.ts'
import { changeDrivers, type Contributions } from './rules/score.ts'
import { writeProbabilities } from './churn.ts'
import { getScoreAlerts, scoringInputs } from './store.ts'

// customer.score_changed and change_drivers. With score alerts set, each scoring batch compares
// every customer's scores before and after, keeps each customer's contributions of the latest
// scoring that changed them (customer_contributions), and announces the changes the alerts ask
// for, with the properties that moved them, in the batch's transaction.

// What explainCustomer reads of each customer: current attributes, latest metrics, and the
// snapshot its engagement score is the score of; and the change_drivers of its latest change.
type ExplanationRow = ExplainedCustomer & {
  service_id: number
  external_id: string
  name: string | null
  change_drivers: ChangeDriver[]
}
export const explanationRows = (sql: Sql | Tx, accountId: number, where: ReturnType<Sql>) => sql<
  ExplanationRow[]
>`
  select c.service_id, c.external_id, c.name, c.attributes, c.metrics,
    to_char(h.last_seen, 'YYYY-MM-DD') as last_seen, s."values" as snapshot,
    coalesce(k.change_drivers, '[]') as change_drivers
  from customers c
    left join customer_scores h on h.account_id = c.account_id and h.customer_id = c.service_id
    left join customer_snapshots s on s.account_id = c.account_id and s.customer_id = c.service_id
      and s.date = h.last_seen
    left join customer_contributions k on k.account_id = c.account_id
      and k.customer_id = c.service_id
  where c.account_id = ${accountId} and ${where} order by c.service_id`

const readScores = async (tx: Tx, accountId: number, ids: number[]) =>
  new Map(
    (
      await tx<(Scores & { customer_id: number })[]>`
        select customer_id, ${tx([...ALERT_SCORES])} from customer_scores
        where account_id = ${accountId} and customer_id = any(${ids}::bigint[])`
    ).map((r) => [r.customer_id, r]),
  )

const readContributions = async (tx: Tx, accountId: number, ids: number[]) =>
  new Map(
    (
      await tx<{ customer_id: number; contributions: Contributions }[]>`
        select customer_id, contributions from customer_contributions
        where account_id = ${accountId} and customer_id = any(${ids}::bigint[])`
    ).map((r) => [r.customer_id, r.contributions]),
  )

// Types, not interfaces, all the way down: postgres.js takes JSON as JSONValue, which needs
// index signatures.
type Saved = { id: number; contributions: Contributions; drivers: ChangeDriver[] }
const saveContributions = (tx: Tx, accountId: number, rows: Saved[]) => tx`
  insert into customer_contributions (account_id, customer_id, contributions, change_drivers)
  select ${accountId}, x.id, x.contributions, x.drivers
  from jsonb_to_recordset(${tx.json(rows)}) as x(id bigint, contributions jsonb, drivers jsonb)
  on conflict (account_id, customer_id) do update
    set contributions = excluded.contributions, change_drivers = excluded.change_drivers`

const NO_SCORES = Object.fromEntries(ALERT_SCORES.map((s) => [s, null])) as Scores
const same = (a: Scores, b: Scores) => ALERT_SCORES.every((s) => a[s] === b[s])

// Called around a batch's scoring statement, in its transaction: `before` reads the scores, the
// returned function compares them with the new ones. A customer without stored contributions gets
// them now, so that the next change of its scores has a "before" to compare with.
export const watchScores = async (
  tx: Tx,
  accountId: number,
  ids: number[],
  inputs: { alerts: ScoreAlerts; model: ScoringModel | null; defs: PropertyDef[]; today: string },
) => {
  const before = await readScores(tx, accountId, ids)
  return async () => {
    const after = await readScores(tx, accountId, ids)
    const stored = await readContributions(tx, accountId, ids)
    const moved = ids.filter(
      (id) => !stored.has(id) || !same(before.get(id) ?? NO_SCORES, after.get(id) ?? NO_SCORES),
    )
    if (moved.length === 0) return 0
    const rows = await explanationRows(tx, accountId, tx`c.service_id = any(${moved}::bigint[])`)
    const changes = []
    const saved: Saved[] = []
    for (const row of rows) {
      const { engagement, fit } = explainCustomer(inputs.model, inputs.defs, row, inputs.today)
      const was = stored.get(row.service_id)
      const drivers = was ? changeDrivers(was, { engagement, fit }) : []
      saved.push({ id: row.service_id, contributions: { engagement, fit }, drivers })
      const customer = { service_id: row.service_id, external_id: row.external_id, name: row.name }
      for (const change of scoreChanges(
        inputs.alerts,
        before.get(row.service_id) ?? NO_SCORES,
        after.get(row.service_id) ?? NO_SCORES,
      ))
        changes.push({
          ...customer,
          ...change,
          scoring_date: inputs.today,
          change_drivers: drivers,
        })
    }
    await saveContributions(tx, accountId, saved)
    return enqueueEvent(tx, accountId, 'customer.score_changed', changes)
  }
}

// The write of a churn training's probabilities as of `day`, made outside a scoring batch: one call
// per batch of ids in the writing transaction, its changes announced as a batch's are (with score
// alerts). Handed to churn/train.ts by the jobs edge.
export const probabilitiesWriter = async (sql: Sql, accountId: number, day: string) => {
  const alerts = await getScoreAlerts(sql, accountId)
  const inputs = Object.keys(alerts).length > 0 && (await scoringInputs(sql, accountId, 'customer'))
  return async (tx: Tx, ids: number[], probabilities: number[]) => {
    const compare =
      inputs &&
      (await watchScores(tx, accountId, ids, {
        alerts,
        model: inputs.model,
        defs: inputs.defs,
        today: day,
      }))
    await writeProbabilities(tx, accountId, ids, probabilities, day)
    if (compare) await compare()
  }
}
