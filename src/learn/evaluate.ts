// Measures of a probabilistic classifier and the folds it is measured on.
import { sigmoid } from './logistic.ts'

// A seeded generator (mulberry32), so that a training is repeatable.
export const random = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Stratified k folds: each class shuffled and dealt round the folds, so every fold holds its share
// of churned customers. Answers each row's fold.
export const stratifiedFolds = (y: Float64Array, k: number, seed: number) => {
  const next = random(seed)
  const fold = new Uint8Array(y.length)
  for (const label of [0, 1]) {
    const rows = [...y.keys()].filter((i) => y[i] === label)
    for (let i = rows.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      ;[rows[i], rows[j]] = [rows[j], rows[i]]
    }
    rows.forEach((row, i) => {
      fold[row] = i % k
    })
  }
  return fold
}

// Midranks (1-based, ties sharing their mean rank) of the values.
const midranks = (values: Float64Array | number[]) => {
  const order = [...values.keys()].sort((a, b) => values[a] - values[b])
  const ranks = new Float64Array(values.length)
  for (let i = 0; i < order.length; ) {
    let j = i
    while (j + 1 < order.length && values[order[j + 1]] === values[order[i]]) j++
    for (let k = i; k <= j; k++) ranks[order[k]] = (i + j) / 2 + 1
    i = j + 1
  }
  return ranks
}

// The AUC and its 95% interval by DeLong's method (DeLong, DeLong and Clarke-Pearson 1988, with
// the midrank computation of Sun and Xu 2014).
export const aucWithInterval = (scores: Float64Array, y: Float64Array) => {
  const pos = [...y.keys()].filter((i) => y[i] === 1)
  const neg = [...y.keys()].filter((i) => y[i] !== 1)
  const m = pos.length
  const n = neg.length
  if (m === 0 || n === 0) return { auc: Number.NaN, low: Number.NaN, high: Number.NaN }
  const all = midranks(scores)
  const inPos = midranks(pos.map((i) => scores[i]))
  const inNeg = midranks(neg.map((i) => scores[i]))
  const v10 = pos.map((i, k) => (all[i] - inPos[k]) / n)
  const v01 = neg.map((i, k) => 1 - (all[i] - inNeg[k]) / m)
  const auc = v10.reduce((a, b) => a + b, 0) / m
  const variance = (v: number[]) => {
    const mean = v.reduce((a, b) => a + b, 0) / v.length
    return v.length > 1 ? v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1) : 0
  }
  const se = Math.sqrt(variance(v10) / m + variance(v01) / n)
  return { auc, low: Math.max(0, auc - 1.96 * se), high: Math.min(1, auc + 1.96 * se) }
}
export const auc = (scores: Float64Array, y: Float64Array) => aucWithInterval(scores, y).auc

export const brier = (p: Float64Array, y: Float64Array) =>
  p.reduce((s, v, i) => s + (v - y[i]) ** 2, 0) / p.length

export const logLoss = (raw: Float64Array, y: Float64Array) =>
  raw.reduce((s, z, i) => {
    const p = Math.min(Math.max(sigmoid(z), 1e-15), 1 - 1e-15)
    return s - (y[i] * Math.log(p) + (1 - y[i]) * Math.log(1 - p))
  }, 0) / raw.length

// Equal-count bins of the predicted probabilities: each bin's mean prediction beside the share
// of it that churned.
export const calibrationTable = (p: Float64Array, y: Float64Array, bins = 10) => {
  const order = [...p.keys()].sort((a, b) => p[a] - p[b])
  const table: { predicted: number; observed: number; customers: number }[] = []
  for (let b = 0; b < bins; b++) {
    const rows = order.slice(
      Math.floor((b * order.length) / bins),
      Math.floor(((b + 1) * order.length) / bins),
    )
    if (rows.length === 0) continue
    const mean = (f: (i: number) => number) => rows.reduce((s, i) => s + f(i), 0) / rows.length
    table.push({
      predicted: mean((i) => p[i]),
      observed: mean((i) => y[i]),
      customers: rows.length,
    })
  }
  return table
}

// Platt scaling: the a and b of sigmoid(a * raw + b) that fit the labels best (Newton's method on
// the log loss, with Platt's smoothed targets against overfitting a small set).
export interface Platt {
  a: number
  b: number
}
export const fitPlatt = (raw: Float64Array, y: Float64Array): Platt => {
  const positives = y.reduce((s, v) => s + v, 0)
  const negatives = y.length - positives
  const hi = (positives + 1) / (positives + 2)
  const lo = 1 / (negatives + 2)
  let a = 1
  let b = 0
  for (let iter = 0; iter < 50; iter++) {
    let ga = 0
    let gb = 0
    let haa = 1e-9
    let hab = 0
    let hbb = 1e-9
    for (let i = 0; i < raw.length; i++) {
      const p = sigmoid(a * raw[i] + b)
      const r = p - (y[i] === 1 ? hi : lo)
      const w = p * (1 - p)
      ga += r * raw[i]
      gb += r
      haa += w * raw[i] * raw[i]
      hab += w * raw[i]
      hbb += w
    }
    const det = haa * hbb - hab * hab
    if (det <= 0) break
    const da = (hbb * ga - hab * gb) / det
    const db = (haa * gb - hab * ga) / det
    a -= da
    b -= db
    if (Math.abs(da) + Math.abs(db) < 1e-10) break
  }
  return { a, b }
}
