// The learned churn probability (docs/scoring.md): both candidate models evaluated by stratified
// k-fold cross-validation on the account's own customers, the better one (by out-of-fold AUC)
// trained on all of them, calibrated by Platt scaling of its out-of-fold scores, and explained per
// customer by attributions that sum to its log-odds. Pure: the module reads and writes the rows.
import type { PropertyDef } from '../property.ts'
import {
  aucWithInterval,
  brier,
  calibrationTable,
  fitPlatt,
  logLoss,
  type Platt,
  random,
  stratifiedFolds,
} from './evaluate.ts'
import {
  type Encoder,
  encode,
  type Matrix,
  matrixReader,
  type Sample,
  shownValue,
} from './features.ts'
import {
  binMatrix,
  type Forest,
  forestBase,
  leafOf,
  predictForest,
  TREE_OPTIONS,
  type TreeOptions,
  trainBinned,
  treeShap,
} from './gbdt.ts'
import {
  designOf,
  designScore,
  fitDesign,
  type Linear,
  linearBase,
  linearContributions,
  linearOf,
  predictLinear,
  sigmoid,
} from './logistic.ts'

export type { Sample }
const ALGORITHMS = ['gradient_boosted_trees', 'logistic_regression'] as const
export type Algorithm = (typeof ALGORITHMS)[number]

export interface ChurnModel {
  algorithm: Algorithm
  encoder: Encoder
  forest?: Forest
  linear?: Linear
  platt: Platt
}

export interface Evaluation {
  method: string
  auc: number
  auc_low: number
  auc_high: number
  brier: number
  calibration: { predicted: number; observed: number; customers: number }[]
  // Each candidate's out-of-fold AUC, which chose the algorithm.
  candidates: Record<Algorithm, number>
}

export interface Trained {
  model: ChurnModel
  evaluation: Evaluation
  features: { codename: string; importance: number }[]
  training: { customers: number; churned: number; active: number }
}

const FOLDS = 5
// The least customers of each class a training takes (SPEC 13).
export const MIN_CLASS = 20
const SEED = 48
// Customers whose attributions make the features' importance.
const IMPORTANCE_SAMPLE = 1000
// Trees a fold grows past its best out-of-fold loss before it stops.
const PATIENCE = 20

interface TrainOptions {
  today: string
  leadDays: number
  trees?: TreeOptions
}

export const trainChurnModel = (
  defs: PropertyDef[],
  samples: readonly Sample[],
  options: TrainOptions,
): Trained => {
  const reader = matrixReader(defs, options.today, options.leadDays)
  reader.add(samples)
  return trainChurnMatrix(reader.finish(), options)
}

// The training of customers read into a matrix (matrixReader): the folds are index arrays into it,
// and both models read it through one binning (trees) and one design (linear), each learned from
// the values alone.
export const trainChurnMatrix = (
  { encoder, X, y, n }: { encoder: Encoder; X: Matrix; y: Float64Array; n: number },
  options: Pick<TrainOptions, 'trees'>,
): Trained => {
  const treeOptions = options.trees ?? TREE_OPTIONS
  const folds = stratifiedFolds(y, FOLDS, SEED)
  const binned = binMatrix(X)
  const design = designOf(X)
  const everyone = Uint32Array.from(y.keys())
  // The fit on everyone is both the linear candidate's final model and where the folds' fits start.
  const linearAll = fitDesign(design, y, everyone)
  const oofLinear = new Float64Array(n)
  const fitted: { forest: Forest; valid: Uint32Array }[] = []
  // Out-of-fold log loss after each tree, summed over the folds: picks the number of trees.
  const lossAt = new Float64Array(treeOptions.trees)
  for (let k = 0; k < FOLDS; k++) {
    const train = everyone.filter((i) => folds[i] !== k)
    const valid = everyone.filter((i) => folds[i] === k)
    const yv = Float64Array.from(valid, (i) => y[i])
    const beta = fitDesign(design, y, train, undefined, linearAll)
    for (const i of valid) oofLinear[i] = designScore(design, beta, i)
    // The fold's out-of-fold log loss after each tree; it stops growing PATIENCE trees
    // past its best.
    const raw = new Float64Array(valid.length)
    const curve: number[] = []
    let best = Number.POSITIVE_INFINITY
    let bestAt = 0
    const forest = trainBinned(binned, y, train, treeOptions, ({ bias, trees }) => {
      const tree = trees[trees.length - 1]
      for (let v = 0; v < raw.length; v++)
        raw[v] += (trees.length === 1 ? bias : 0) + leafOf(tree, X, valid[v]).value
      const loss = logLoss(raw, yv)
      if (loss < best) {
        best = loss
        bestAt = curve.length
      }
      curve.push(loss)
      return curve.length - 1 - bestAt < PATIENCE
    })
    // A fold that stopped early keeps its last loss for the longer counts.
    for (let t = 0; t < treeOptions.trees; t++)
      lossAt[t] += (curve[t] ?? curve[curve.length - 1]) * valid.length
    fitted.push({ forest, valid })
  }
  const trees = lossAt.indexOf(Math.min(...lossAt)) + 1
  const oofTrees = new Float64Array(n)
  for (const { forest, valid } of fitted)
    for (const i of valid)
      oofTrees[i] = forest.trees
        .slice(0, trees)
        .reduce((z, t) => z + leafOf(t, X, i).value, forest.bias)
  const candidates = {
    gradient_boosted_trees: aucWithInterval(oofTrees, y).auc,
    logistic_regression: aucWithInterval(oofLinear, y).auc,
  }
  // A tie goes to the simpler model.
  const algorithm: Algorithm =
    candidates.gradient_boosted_trees > candidates.logistic_regression
      ? 'gradient_boosted_trees'
      : 'logistic_regression'
  const oof = algorithm === 'gradient_boosted_trees' ? oofTrees : oofLinear
  const platt = calibrated(oof, y)
  const p = oof.map((z) => sigmoid(platt.a * z + platt.b))
  const { auc, low, high } = aucWithInterval(oof, y)
  const churned = y.reduce((a, b) => a + b, 0)
  const model: ChurnModel =
    algorithm === 'gradient_boosted_trees'
      ? {
          algorithm,
          encoder,
          platt,
          forest: trainBinned(binned, y, everyone, { ...treeOptions, trees }),
        }
      : { algorithm, encoder, platt, linear: linearOf(design, linearAll) }
  return {
    model,
    evaluation: {
      method: `stratified ${FOLDS}-fold cross-validation`,
      auc,
      auc_low: low,
      auc_high: high,
      brier: brier(p, y),
      calibration: calibrationTable(p, y),
      candidates,
    },
    features: importance(model, X, n),
    training: { customers: n, churned, active: n - churned },
  }
}

// Platt scaling that never reverses the ranking: a model whose out-of-fold scores run against the
// labels (noise) says the base rate to everyone rather than the opposite of what it learned.
const calibrated = (oof: Float64Array, y: Float64Array): Platt => {
  const platt = fitPlatt(oof, y)
  if (platt.a > 0) return platt
  const rate = Math.min(Math.max(y.reduce((s, v) => s + v, 0) / y.length, 1e-6), 1 - 1e-6)
  return { a: 0, b: Math.log(rate / (1 - rate)) }
}

// The raw (uncalibrated) attributions of one encoded row and the base value they start from.
const rawAttributions = (model: ChurnModel, x: (j: number) => number) => {
  const columns = model.encoder.columns.length
  if (model.forest)
    return { phi: treeShap(model.forest, x, columns), base: forestBase(model.forest) }
  const linear = model.linear as Linear
  return { phi: linearContributions(linear, x, columns), base: linearBase(linear) }
}

// Attributions of the calibrated log-odds: Platt's a scales each, and the base value becomes
// a * base + b, so they still sum to the logit of the probability.
const attributions = (model: ChurnModel, x: (j: number) => number) => {
  const { phi, base } = rawAttributions(model, x)
  const { a, b } = model.platt
  return { phi: phi.map((v) => v * a), base: a * base + b }
}

// Per property: the sum of its columns' attributions.
const byProperty = (model: ChurnModel, phi: Float64Array) => {
  const sums = new Map<string, number>()
  model.encoder.columns.forEach((col, j) => {
    sums.set(col.codename, (sums.get(col.codename) ?? 0) + phi[j])
  })
  return sums
}

// The features' importance: each property's mean absolute attribution over (a sample of) the
// training customers, as a share of all of them.
const importance = (model: ChurnModel, X: Matrix, n: number) => {
  const next = random(SEED)
  const rows =
    n <= IMPORTANCE_SAMPLE
      ? [...Array(n).keys()]
      : Array.from({ length: IMPORTANCE_SAMPLE }, () => Math.floor(next() * n))
  const totals = new Map<string, number>(model.encoder.defs.map((d) => [d.codename, 0]))
  for (const i of rows) {
    const { phi } = rawAttributions(model, (j) => X[j][i])
    for (const [codename, v] of byProperty(model, phi))
      totals.set(codename, (totals.get(codename) ?? 0) + Math.abs(v))
  }
  const sum = [...totals.values()].reduce((a, b) => a + b, 0)
  return [...totals]
    .map(([codename, v]) => ({ codename, importance: sum > 0 ? v / sum : 0 }))
    .sort((a, b) => b.importance - a.importance || (a.codename < b.codename ? -1 : 1))
}

const rawScores = (model: ChurnModel, X: Matrix, n: number) =>
  model.forest ? predictForest(model.forest, X, n) : predictLinear(model.linear as Linear, X, n)

// The churn probability of each row of a matrix of the model's columns.
export const matrixProbabilities = (model: ChurnModel, X: Matrix, n: number) => {
  const { a, b } = model.platt
  return Array.from(rawScores(model, X, n), (z) => sigmoid(a * z + b))
}

// The churn probability of each sample.
export const churnProbabilities = (model: ChurnModel, samples: readonly Sample[], today: string) =>
  matrixProbabilities(model, encode(model.encoder, samples, today), samples.length)

export interface Driver {
  codename: string
  value: unknown
  contribution: number
}

// One customer's probability, the logit it is, the base value and every property's attribution
// (summing with the base to the logit); `up` and `down` the three largest each way.
export const explainChurn = (model: ChurnModel, sample: Sample, today: string, top = 3) => {
  const X = encode(model.encoder, [sample], today)
  const { phi, base } = attributions(model, (j) => X[j][0])
  const logit = phi.reduce((s, v) => s + v, base)
  const drivers: Driver[] = [...byProperty(model, phi)].map(([codename, contribution]) => ({
    codename,
    value: shownValue(model.encoder, sample, codename, today),
    contribution,
  }))
  const up = drivers
    .filter((d) => d.contribution > 0)
    .sort((a, b) => b.contribution - a.contribution)
  const down = drivers
    .filter((d) => d.contribution < 0)
    .sort((a, b) => a.contribution - b.contribution)
  return {
    probability: sigmoid(logit),
    logit,
    base,
    drivers,
    up: up.slice(0, top),
    down: down.slice(0, top),
  }
}
