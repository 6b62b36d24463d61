// The churn model's rows (sql/050): the account's model and the state of its latest training, and
// the customers a training learns from (the probabilities it makes are written by
// scoring/churn.ts). Every statement names the account, so that on Citus it runs on the
// account's shard.
import type { PropertyDef } from '../property.ts'
import type { Sql, Tx } from '../db/client.ts'
import type { ChurnModel, Evaluation, Sample, Trained } from '../learn/churn.ts'

interface ModelRow {
  status: 'training' | 'ready' | 'failed'
  started_at: string
  trained_at: string | null
  features: string[] | null
  error: string | null
  algorithm: string | null
  model: ChurnModel | null
  evaluation: Evaluation | null
  training: Trained['training'] | null
  importance: Trained['features'] | null
}

const iso = (column: string) =>
  `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

export const readModelRow = async (sql: Sql | Tx, accountId: number, withModel = false) => {
  const [row] = await sql<ModelRow[]>`
    select status, ${sql.unsafe(iso('started_at'))} as started_at,
      ${sql.unsafe(iso('trained_at'))} as trained_at, features, error, algorithm,
      ${withModel ? sql`model` : sql`null::jsonb as model`}, evaluation, training, importance
    from churn_models where account_id = ${accountId}`
  return row
}

// The model that serves, or none.
export const servingModel = async (sql: Sql | Tx, accountId: number) => {
  const [row] = await sql<{ model: ChurnModel }[]>`
    select model from churn_models where account_id = ${accountId} and model is not null`
  return row?.model
}

// A training asked for: the row is 'training' from now, unless one already is (answered as it is).
// Locks the row, so two requests never both enqueue. A training started more than STALE ago is
// taken for one whose worker died (its job is tried once), and started again. The times are bound
// and read back as values: Citus allows no stable function over a column in an upsert's condition,
// none in its SET (the new time is the inserted row's), nor to_char in RETURNING.
const STALE_MS = 3_600_000
export const markTraining = async (tx: Tx, accountId: number, features: string[] | null) => {
  const [row] = await tx<{ started_at: Date }[]>`
    insert into churn_models (account_id, status, started_at, features)
    values (${accountId}, 'training', now(), ${features === null ? null : tx.json(features)})
    on conflict (account_id) do update set status = 'training', started_at = excluded.started_at,
      features = excluded.features, error = null
      where churn_models.status <> 'training'
        or churn_models.started_at < ${new Date(Date.now() - STALE_MS)}::timestamptz
    returning started_at`
  if (row) return { started_at: row.started_at.toISOString(), fresh: true }
  const [running] = await tx<{ started_at: string }[]>`
    select ${tx.unsafe(iso('started_at'))} as started_at from churn_models
      where account_id = ${accountId}`
  return { started_at: running.started_at, fresh: false }
}

// A plain JSON value of the learner's objects, for jsonb parameters.
const plain = (value: unknown) => JSON.parse(JSON.stringify(value))

export const saveTrained = (sql: Sql | Tx, accountId: number, t: Trained) => sql`
  update churn_models set status = 'ready', error = null, trained_at = now(),
    algorithm = ${t.model.algorithm},
    model = ${sql.json(plain(t.model))}, evaluation = ${sql.json(plain(t.evaluation))},
    training = ${sql.json(t.training)}, importance = ${sql.json(t.features)}
  where account_id = ${accountId}`

// A failed training says why and leaves the serving model (model, trained_at, evaluation)
// as it was.
export const saveFailure = (sql: Sql | Tx, accountId: number, error: string) => sql`
  update churn_models set status = 'failed', error = ${error} where account_id = ${accountId}`

// Customers per page of a training's read: keeps each statement's result small.
export const SAMPLE_PAGE = 5000

interface SampleRow {
  service_id: number
  attributes: Record<string, unknown>
  is_churned: boolean
  churned_date: string | null
  snapshots: { date: string; values: Record<string, unknown> }[] | null
}

// The given customers (or one keyset page of all of them after `after`) with their snapshots,
// each snapshot's values cut to the metrics the model reads.
export const readSamples = async (
  sql: Sql | Tx,
  accountId: number,
  metrics: string[],
  page: { ids: number[] } | { after: number },
) => {
  const which =
    'ids' in page
      ? sql`c.service_id = any(${page.ids}::bigint[])`
      : sql`c.service_id > ${page.after} order by c.service_id limit ${SAMPLE_PAGE}`
  const rows = await sql<SampleRow[]>`
    select c.service_id, c.attributes, c.is_churned,
      to_char(c.churned_date, 'YYYY-MM-DD') as churned_date,
      (select json_agg(json_build_object('date', to_char(s.date, 'YYYY-MM-DD'), 'values',
          (select coalesce(jsonb_object_agg(v.key, v.value), '{}') from jsonb_each(s."values") v
            where v.key = any(${metrics}::text[]))))
        from customer_snapshots s where s.account_id = ${accountId}
          and s.customer_id = c.service_id) as snapshots
    from customers c where c.account_id = ${accountId} and ${which}`
  return rows.map((r) => ({
    id: r.service_id,
    sample: {
      attributes: r.attributes,
      snapshots: r.snapshots ?? [],
      churned: r.is_churned,
      churnedDate: r.churned_date,
    } satisfies Sample,
  }))
}

// The customer of an external id, as a sample, or none.
export const readSampleOf = async (
  sql: Sql | Tx,
  accountId: number,
  metrics: string[],
  externalId: string,
) => {
  const [row] = await sql<{ service_id: number }[]>`
    select service_id from customers where account_id = ${accountId}
      and external_id = ${externalId}`
  return row
    ? (await readSamples(sql, accountId, metrics, { ids: [row.service_id] }))[0]?.sample
    : undefined
}

export const metricsOf = (defs: readonly PropertyDef[]) =>
  defs.filter((d) => d.kind === 'metric').map((d) => d.codename)

// SERVICE_CHURN_MODEL_RETRAIN: every account that has trained (or tried to) trains again, with the
// features it asked for last; one already training is left to finish. Answers the accounts marked.
export const markAllTraining = async (tx: Tx) =>
  (
    await tx<{ account_id: number }[]>`
      update churn_models set status = 'training', started_at = now(), error = null
      where status <> 'training' returning account_id`
  ).map((r) => Number(r.account_id))
