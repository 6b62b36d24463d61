// Training an account's churn model (docs/scoring.md, "Learned churn probability"): asked for by
// POST /api/v1/churn-model/train, run as a job of the account, and followed by the scoring of all
// its customers. The learner is pure (src/learn/); this reads its input and writes what it made.
import { readCatalog, readLabels } from '../catalog/properties.ts'
import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { addCustomersChanged, addJobs, churnTrainJob, type CronPayload } from '../db/jobs.ts'
import { today } from '../dates.ts'
import { refuse } from '../errors.ts'
import {
  churnProbabilities,
  explainChurn,
  MIN_CLASS,
  matrixProbabilities,
  trainChurnMatrix,
} from '../learn/churn.ts'
import { matrixReader } from '../learn/features.ts'
import type { PropertyDef } from '../property.ts'
import { meant } from '../validate.ts'
import {
  markAllTraining,
  markTraining,
  metricsOf,
  readModelRow,
  readSampleOf,
  readSamples,
  SAMPLE_PAGE,
  saveFailure,
  saveTrained,
  servingModel,
} from './store.ts'

// The features a training asks for, each a customer property of the account ("did you mean" else).
const checkFeatures = async (sql: Sql, accountId: number, features: string[] | undefined) => {
  if (!features) return null
  const known = (await readCatalog(sql, accountId, 'customer')).map((d) => d.codename)
  features.forEach((f, i) => {
    if (known.includes(f)) return
    const hint = meant(f, known)
    refuse(400, 'The request is invalid.', [
      {
        path: `/features/${i}`,
        message: `${f} is no customer property${hint ? `; did you mean ${hint}?` : ''}`,
      },
    ])
  })
  return [...new Set(features)]
}

// POST /api/v1/churn-model/train: the row says 'training' and the job is added in one transaction;
// a training already running is answered as it is.
export const requestTraining = async (
  app: App,
  accountId: number,
  features: string[] | undefined,
) => {
  const wanted = await checkFeatures(app.sql, accountId, features)
  await checkLabels(app.sql, accountId)
  return app.sql.begin(async (tx) => {
    const { started_at, fresh } = await markTraining(tx, accountId, wanted)
    if (fresh) await addJobs(tx, [churnTrainJob(accountId)])
    return { status: 'training' as const, started_at }
  })
}

// Every customer of the account read page by page into the training's matrix: a page's samples
// are reduced to numbers and dropped, so the worker's memory grows by typed arrays only.
const readMatrix = async (
  sql: Sql,
  accountId: number,
  defs: PropertyDef[],
  day: string,
  leadDays: number,
) => {
  const reader = matrixReader(defs, day, leadDays)
  const ids: number[] = []
  for (let after = 0; ; ) {
    const page = await readSamples(sql, accountId, metricsOf(defs), { after })
    reader.add(page.map((c) => c.sample))
    for (const c of page) ids.push(c.id)
    if (page.length < SAMPLE_PAGE) return { ids, matrix: reader.finish() }
    after = page[page.length - 1].id
  }
}

class TooFewLabels extends Error {}

// The write of a page of a training's probabilities as of `day`, in the transaction given, its
// changes announced (customer.score_changed): scoring/changes.ts probabilitiesWriter, handed in by
// the jobs edge, as scoring owns the writes of scores and imports churn, not the other way.
type ProbabilitiesWriter = (
  sql: Sql,
  accountId: number,
  day: string,
) => Promise<(tx: Tx, ids: number[], probabilities: number[]) => Promise<void>>

// The train_churn_model task. A training that cannot be made (too few labels) or that fails is
// recorded as failed with its reason, and the model that served before keeps serving.
// Run by the retrain cron without an account, it fans out one training per account.
export const trainChurnTask = async (
  app: App,
  payload: CronPayload,
  writer: ProbabilitiesWriter,
) => {
  if (payload.account_id === undefined)
    return app.sql.begin(async (tx) => {
      const accounts = await markAllTraining(tx)
      await addJobs(tx, accounts.map(churnTrainJob))
      return { accounts: accounts.length }
    })
  const accountId = payload.account_id
  const row = await readModelRow(app.sql, accountId)
  if (!row || row.status !== 'training') return { trained: false }
  try {
    const catalog = await readCatalog(app.sql, accountId, 'customer')
    const defs = row.features ? catalog.filter((d) => row.features!.includes(d.codename)) : catalog
    const day = today()
    const { ids, matrix } = await readMatrix(
      app.sql,
      accountId,
      defs,
      day,
      app.config.churnModelLeadDays,
    )
    const churned = matrix.y.reduce((a, b) => a + b, 0)
    if (churned < MIN_CLASS || matrix.n - churned < MIN_CLASS)
      throw new TooFewLabels(tooFew(churned, matrix.n - churned))
    const trained = trainChurnMatrix(matrix, {})
    // The customers just read are scored from their matrix (the encoding a scoring would make).
    const p = matrixProbabilities(trained.model, matrix.X, matrix.n)
    const write = await writer(app.sql, accountId, day)
    await app.sql.begin(async (tx) => {
      await saveTrained(tx, accountId, trained)
      for (let k = 0; k < ids.length; k += SAMPLE_PAGE)
        await write(tx, ids.slice(k, k + SAMPLE_PAGE), p.slice(k, k + SAMPLE_PAGE))
      // Segments and "This week" read the probabilities too, as any writer of scores
      // has them redone.
      await addCustomersChanged(tx, accountId)
    })
    return { trained: true, customers: matrix.n, algorithm: trained.model.algorithm }
  } catch (err) {
    await saveFailure(app.sql, accountId, (err as Error).message)
    if (err instanceof TooFewLabels) return { trained: false, error: err.message }
    throw err
  }
}

const tooFew = (churned: number, active: number) =>
  `A churn model needs at least ${MIN_CLASS} churned and ${MIN_CLASS} active customers; ` +
  `the account has ${churned} churned and ${active} active.`

// The refusal of a training asked for with too few labels: checked at the request too, so that the
// client hears it at once (422) rather than from a failed training.
const checkLabels = async (sql: Sql, accountId: number) => {
  const [{ churned, active }] = await sql<{ churned: number; active: number }[]>`
    select count(*) filter (where is_churned)::int as churned,
    count(*) filter (where not is_churned)::int as active
    from customers where account_id = ${accountId}`
  if (churned < MIN_CLASS || active < MIN_CLASS) refuse(422, tooFew(churned, active))
}

// The probabilities of the given customers by the account's serving model as of the scoring date,
// none without one: the scoring of customers as they are processed (scoring/batch.ts writes them).
export const churnProbabilitiesOf = async (
  sql: Sql | Tx,
  accountId: number,
  ids: number[],
  day: string,
) => {
  const model = await servingModel(sql, accountId)
  if (!model || ids.length === 0) return undefined
  const customers = await readSamples(sql, accountId, metricsOf(model.encoder.defs), { ids })
  return {
    ids: customers.map((c) => c.id),
    probabilities: churnProbabilities(
      model,
      customers.map((c) => c.sample),
      day,
    ),
  }
}

// The labels of the properties that raise each customer's probability most (churn_drivers' `up`),
// by service id, for the few customers a list shows; none without a model.
export const churnRiseDrivers = async (sql: Sql | Tx, accountId: number, ids: number[]) => {
  const model = await servingModel(sql, accountId)
  if (!model || ids.length === 0) return new Map<number, string[]>()
  const customers = await readSamples(sql, accountId, metricsOf(model.encoder.defs), { ids })
  const labels = await readLabels(sql, accountId, 'customer')
  const day = today()
  return new Map(
    customers.map((c) => [
      c.id,
      explainChurn(model, c.sample, day).up.map((d) => labels[d.codename] ?? d.codename),
    ]),
  )
}

// churn_drivers of GET /api/v1/customer/{id}: up to 3 each way, labelled; null without a model.
export const churnDrivers = async (sql: Sql, accountId: number, externalId: string) => {
  const model = await servingModel(sql, accountId)
  if (!model) return null
  const [sample, labels] = await Promise.all([
    readSampleOf(sql, accountId, metricsOf(model.encoder.defs), externalId),
    readLabels(sql, accountId, 'customer'),
  ])
  if (!sample) return null
  const { up, down } = explainChurn(model, sample, today())
  const shown = (d: (typeof up)[number]) => ({
    codename: d.codename,
    label: labels[d.codename] ?? d.codename,
    value: d.value ?? null,
    contribution: d.contribution,
  })
  return { up: up.map(shown), down: down.map(shown) }
}

// GET /api/v1/churn-model.
export const readChurnModel = async (sql: Sql, accountId: number) => {
  const row = await readModelRow(sql, accountId)
  if (!row)
    return {
      status: 'none' as const,
      trained_at: null,
      algorithm: null,
      training: null,
      evaluation: null,
      features: [],
      error: null,
    }
  const evaluation = row.evaluation && {
    method: row.evaluation.method,
    auc: row.evaluation.auc,
    auc_low: row.evaluation.auc_low,
    auc_high: row.evaluation.auc_high,
    brier: row.evaluation.brier,
    calibration: row.evaluation.calibration,
  }
  return {
    status: row.status,
    started_at: row.started_at,
    trained_at: row.trained_at,
    algorithm: row.algorithm,
    training: row.training,
    evaluation,
    features: row.importance ?? [],
    error: row.error,
  }
}
