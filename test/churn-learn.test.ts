// The learned churn probability's pure core (src/learn/), without a database: on generated
// customers of known structure, what it learns, how honestly it reports it, and that its
// drivers are exact.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { churnProbabilities, explainChurn, trainChurnModel } from '../src/learn/churn.ts'
import { auc, aucWithInterval, fitPlatt, random, stratifiedFolds } from '../src/learn/evaluate.ts'
import { encode, fitEncoder, type Sample } from '../src/learn/features.ts'
import { type Forest, forestBase, predictForest, trainForest, treeShap } from '../src/learn/gbdt.ts'
import { predictLinear, trainLinear } from '../src/learn/logistic.ts'
import { CHURN_DEFS, generate, type Structure } from './helpers/churn-data.ts'

const TODAY = '2026-12-01'
const LEAD = 30
const labels = (s: readonly Sample[]) => Float64Array.from(s, (x) => (x.churned ? 1 : 0))
// One training per structure, shared by the tests that look at it.
const runs = new Map<Structure, ReturnType<typeof run>>()
const run = (structure: Structure) => {
  const train = generate(2000, structure, 1, TODAY)
  const held = generate(2000, structure, 2, TODAY)
  const trained = trainChurnModel(CHURN_DEFS, train, { today: TODAY, leadDays: LEAD })
  const p = Float64Array.from(churnProbabilities(trained.model, held, TODAY))
  return { train, held, trained, measured: auc(p, labels(held)) }
}
const trainedOn = (structure: Structure) => {
  if (!runs.has(structure)) runs.set(structure, run(structure))
  return runs.get(structure)!
}

// The bar each structure must reach on customers the model never saw. The generated log-odds
// itself (the best any model can do) reaches about 0.05 more; a model that missed the structure
// (a line through the interaction, a category read as a number) stays well below.
const BARS: Record<Structure, number> = { linear: 0.82, interaction: 0.84, mixed: 0.85 }

for (const structure of ['linear', 'interaction', 'mixed'] as const) {
  const title =
    `${structure} signal: the held-out AUC reaches ${BARS[structure]}, ` +
    'and the cross-validated AUC predicts it'
  test(title, () => {
    const { held, trained, measured } = trainedOn(structure)
    const ceiling = auc(
      Float64Array.from(held, (s) => s.logit),
      labels(held),
    )
    assert.ok(measured >= BARS[structure], `held-out AUC ${measured} (ceiling ${ceiling})`)
    assert.ok(ceiling - measured < 0.05, `held-out AUC ${measured} against the ceiling ${ceiling}`)
    assert.ok(
      Math.abs(trained.evaluation.auc - measured) <= 0.03,
      `CV ${trained.evaluation.auc} vs ${measured}`,
    )
    const { auc_low: low, auc_high: high } = trained.evaluation
    assert.ok(low < trained.evaluation.auc && trained.evaluation.auc < high && high - low < 0.06)
    assert.equal(trained.training.customers, 2000)
    // Calibrated: each tenth's mean prediction is near the share of it that churned (a sigmoid
    // cannot fit the plateaus of the interaction's probabilities closer).
    for (const row of trained.evaluation.calibration)
      assert.ok(Math.abs(row.predicted - row.observed) < 0.15, JSON.stringify(row))
  })
}

test('thresholds and interactions choose the trees, which a linear model cannot match', () => {
  const { train, held, trained, measured } = trainedOn('interaction')
  assert.equal(trained.model.algorithm, 'gradient_boosted_trees')
  const encoder = fitEncoder(CHURN_DEFS, train, TODAY, LEAD)
  const line = trainLinear(encode(encoder, train, TODAY), labels(train))
  const lineAuc = auc(predictLinear(line, encode(encoder, held, TODAY), held.length), labels(held))
  assert.ok(
    lineAuc < BARS.interaction - 0.04,
    `a linear model reaches ${lineAuc}, the chosen ${measured}`,
  )
  assert.ok(
    trained.evaluation.candidates.gradient_boosted_trees >
      trained.evaluation.candidates.logistic_regression,
  )
})

test('shuffled labels: the reported AUC stays within 0.5 ± 0.05', () => {
  for (const structure of ['linear', 'interaction'] as const) {
    const { evaluation } = trainChurnModel(
      CHURN_DEFS,
      generate(2000, structure, 3, TODAY, { shuffle: true }),
      {
        today: TODAY,
        leadDays: LEAD,
      },
    )
    assert.ok(Math.abs(evaluation.auc - 0.5) <= 0.05, `${structure}: ${evaluation.auc}`)
  }
})

test('no leakage: logins that drop in the last 30 days before a churn add nothing to the AUC', () => {
  // Churned customers' logins fall to zero 20 days before they churn: a give-away a
  // model must not see.
  const honest = trainChurnModel(CHURN_DEFS, generate(2000, 'linear', 4, TODAY), {
    today: TODAY,
    leadDays: LEAD,
  })
  const leaky = generate(2000, 'linear', 4, TODAY, { leak: 20 })
  const withLead = trainChurnModel(CHURN_DEFS, leaky, { today: TODAY, leadDays: LEAD })
  assert.ok(
    withLead.evaluation.auc <= honest.evaluation.auc + 0.01,
    `${withLead.evaluation.auc} vs ${honest.evaluation.auc}`,
  )
  // The check can fail: with no lead, the drop is learned and the AUC leaps.
  const noLead = trainChurnModel(CHURN_DEFS, leaky, { today: TODAY, leadDays: 0 })
  assert.ok(noLead.evaluation.auc > honest.evaluation.auc + 0.05, `${noLead.evaluation.auc}`)
})

test("drivers sum to the customer's logit minus the base value within 1e-6, for both algorithms", () => {
  for (const structure of ['interaction', 'linear'] as const) {
    const train = generate(1000, structure, 5, TODAY)
    const { model } = trainChurnModel(CHURN_DEFS, train, { today: TODAY, leadDays: LEAD })
    const held = generate(50, structure, 6, TODAY)
    const p = churnProbabilities(model, held, TODAY)
    held.forEach((s, i) => {
      const e = explainChurn(model, s, TODAY)
      const sum = e.drivers.reduce((t, d) => t + d.contribution, e.base)
      assert.ok(Math.abs(sum - Math.log(p[i] / (1 - p[i]))) < 1e-6, `${structure} ${sum} ${p[i]}`)
      assert.ok(e.up.length <= 3 && e.down.length <= 3)
      assert.ok(e.up.every((d) => d.contribution > 0) && e.down.every((d) => d.contribution < 0))
    })
  }
})

// The path-dependent expectation of the tree given the columns in S, and Shapley values by
// enumerating every subset: what TreeSHAP computes in polynomial time.
const conditional = (forest: Forest, x: number[], S: Set<number>) =>
  forest.trees.reduce((sum, tree) => {
    const walk = (at: number): number => {
      const node = tree[at]
      if (node.feature < 0) return node.value
      if (S.has(node.feature))
        return walk(x[node.feature] <= node.threshold ? node.left : node.right)
      const l = tree[node.left].cover
      const r = tree[node.right].cover
      return (walk(node.left) * l + walk(node.right) * r) / (l + r)
    }
    return sum + walk(0)
  }, forest.bias)
const factorial = (k: number): number => (k <= 1 ? 1 : k * factorial(k - 1))

test('TreeSHAP is exact: it equals the Shapley values found by enumerating all subsets', () => {
  const next = random(7)
  const n = 600
  const X = [0, 1, 2, 3].map(() => Float64Array.from({ length: n }, () => next()))
  const y = Float64Array.from({ length: n }, (_, i) =>
    (X[0][i] > 0.5 && X[1][i] < 0.4) || X[2][i] > 0.8 ? 1 : 0,
  )
  const forest = trainForest(X, y, { trees: 5, depth: 3, rate: 0.3, lambda: 1, minHessian: 1 })
  const M = X.length
  for (let i = 0; i < 5; i++) {
    const x = X.map((col) => col[i])
    const phi = treeShap(forest, (j) => x[j], M)
    for (let f = 0; f < M; f++) {
      let exact = 0
      for (let mask = 0; mask < 1 << M; mask++) {
        if (mask & (1 << f)) continue
        const S = new Set([...Array(M).keys()].filter((j) => mask & (1 << j)))
        const weight = (factorial(S.size) * factorial(M - S.size - 1)) / factorial(M)
        exact += weight * (conditional(forest, x, new Set([...S, f])) - conditional(forest, x, S))
      }
      assert.ok(Math.abs(phi[f] - exact) < 1e-9, `row ${i} column ${f}: ${phi[f]} vs ${exact}`)
    }
    const raw = predictForest(forest, X, n)[i]
    assert.ok(Math.abs(phi.reduce((a, b) => a + b, forestBase(forest)) - raw) < 1e-9)
  }
})

test('features: categories rare or unseen share "other", missing values are flagged, dates count days back', () => {
  const s = (attributes: Record<string, unknown>): Sample => ({
    attributes,
    snapshots: [],
    churned: false,
    churnedDate: null,
  })
  const train = [
    ...Array(10).fill({ plan: 'pro' }),
    ...Array(10).fill({ plan: 'basic' }),
    { plan: 'rare' },
    {},
  ].map(s)
  const defs = [
    { codename: 'plan', kind: 'attribute', type: 'string' },
    { codename: 'since', kind: 'attribute', type: 'date' },
  ] as const
  const encoder = fitEncoder([...defs], train, TODAY, LEAD)
  assert.deepEqual(
    encoder.columns.map((c) => ('category' in c ? c.category : c.part)),
    ['basic', 'pro', 'other', 'missing', 'value'],
  )
  const X = encode(
    encoder,
    [
      s({ plan: 'rare' }),
      s({ plan: 'never-seen' }),
      s({ since: '2026-11-01' }),
      s({ plan: 'pro' }),
    ],
    TODAY,
  )
  const row = (i: number) => X.map((col) => col[i])
  assert.deepEqual(row(0).slice(0, 4), [0, 0, 1, 0])
  assert.deepEqual(row(1).slice(0, 4), [0, 0, 1, 0])
  assert.deepEqual(row(2), [0, 0, 0, 1, 30])
  assert.deepEqual(row(3).slice(0, 4), [0, 1, 0, 0])
  assert.ok(Number.isNaN(row(3)[4]))
})

test("features: a churned customer's snapshots of its last 30 days are not read; the change spans 30 days", () => {
  const defs = [{ codename: 'logins', kind: 'metric', type: 'number' }] as const
  const snapshots = [
    { date: '2026-09-01', values: { logins: 10 } },
    { date: '2026-10-01', values: { logins: 25 } },
    { date: '2026-10-15', values: { logins: 30 } },
    { date: '2026-11-20', values: { logins: 0 } },
  ]
  const churned: Sample = { attributes: {}, snapshots, churned: true, churnedDate: '2026-11-25' }
  const active: Sample = { ...churned, churned: false, churnedDate: null }
  const encoder = fitEncoder([...defs], [churned, active], TODAY, LEAD)
  const X = encode(encoder, [churned, active], TODAY)
  // Churned: read up to 2026-10-26 (latest 30, 30 days before it: 10); active: all (0,
  // and 30 before: 30).
  assert.deepEqual([X[0][0], X[0][1]], [30, 0])
  assert.deepEqual([X[1][0], X[1][1]], [20, -30])
})

test('DeLong interval, folds and Platt scaling on known cases', () => {
  const y = Float64Array.from([0, 0, 1, 1, 0, 1])
  assert.equal(auc(Float64Array.from([0.1, 0.2, 0.8, 0.9, 0.3, 0.7]), y), 1)
  assert.equal(auc(Float64Array.from([0.5, 0.5, 0.5, 0.5, 0.5, 0.5]), y), 0.5)
  // 7 of the 9 (positive, negative) pairs are ordered right.
  const {
    auc: a,
    low,
    high,
  } = aucWithInterval(Float64Array.from([0.1, 0.2, 0.8, 0.9, 0.85, 0.7]), y)
  assert.ok(Math.abs(a - 7 / 9) < 1e-12 && low < a && high <= 1)
  const folds = stratifiedFolds(
    Float64Array.from({ length: 100 }, (_, i) => (i < 20 ? 1 : 0)),
    5,
    1,
  )
  for (let k = 0; k < 5; k++) {
    const members = [...folds.keys()].filter((i) => folds[i] === k)
    assert.equal(members.length, 20)
    assert.equal(members.filter((i) => i < 20).length, 4)
  }
  // Raw scores twice too confident: Platt halves them.
  const next = random(9)
  const z = Float64Array.from({ length: 4000 }, () => (next() - 0.5) * 8)
  const labelsOf = Float64Array.from(z, (v) => (next() < 1 / (1 + Math.exp(-v / 2)) ? 1 : 0))
  const { a: slope } = fitPlatt(z, labelsOf)
  assert.ok(Math.abs(slope - 0.5) < 0.08, `${slope}`)
})
