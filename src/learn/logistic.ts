// L2-regularized logistic regression by Newton's method (iteratively reweighted least squares) on
// standardized columns. A missing value is imputed with its column's mean and flagged by a column
// of its own, so that "no value" can carry risk of its own. The intercept is not penalized.
import type { Matrix } from './features.ts'

export const sigmoid = (z: number) =>
  z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z))

export interface Linear {
  // Per source column: its mean and spread (for standardizing), and whether it has a missing flag.
  mean: number[]
  scale: number[]
  flagged: boolean[]
  // Coefficients of the standardized columns, then of the missing flags in column order, on the
  // original scale of neither: contributions are read off them directly.
  weights: number[]
  flagWeights: number[]
  // The flags' mean over the training rows (for the base value of the drivers).
  flagMean: number[]
  intercept: number
}

const LAMBDA = 1
const ITERATIONS = 15

// What standardizing a matrix takes, learned from its values alone (never the labels): the folds
// of a cross-validation share one design of all the rows.
type Standard = Pick<Linear, 'mean' | 'scale' | 'flagged' | 'flagMean'>

// The design of a matrix, row-major: its standardized columns (a missing value at the mean, 0),
// then the missing flags of the columns that have them, then 1 for the intercept.
interface Design {
  standard: Standard
  n: number
  d: number
  rows: Float64Array
}
export const designOf = (X: Matrix): Design => {
  const n = X.length ? X[0].length : 0
  const mean: number[] = []
  const scale: number[] = []
  const flagged: boolean[] = []
  for (const col of X) {
    let s = 0
    let s2 = 0
    let k = 0
    for (const v of col)
      if (!Number.isNaN(v)) {
        s += v
        s2 += v * v
        k++
      }
    const m = k ? s / k : 0
    const sd = k ? Math.sqrt(Math.max(s2 / k - m * m, 0)) : 0
    mean.push(m)
    scale.push(sd > 1e-12 ? sd : 1)
    flagged.push(k > 0 && k < n)
  }
  const flags = flagged.flatMap((f, j) => (f ? [j] : []))
  const d = X.length + flags.length + 1
  const rows = new Float64Array(n * d)
  X.forEach((col, j) => {
    for (let i = 0; i < n; i++)
      rows[i * d + j] = Number.isNaN(col[i]) ? 0 : (col[i] - mean[j]) / scale[j]
  })
  const flagMean = flags.map((j, f) => {
    let missing = 0
    for (let i = 0; i < n; i++)
      if (Number.isNaN(X[j][i])) {
        rows[i * d + X.length + f] = 1
        missing++
      }
    return missing / n
  })
  for (let i = 0; i < n; i++) rows[i * d + d - 1] = 1
  return { standard: { mean, scale, flagged, flagMean }, n, d, rows }
}

export const trainLinear = (X: Matrix, y: Float64Array, lambda = LAMBDA): Linear => {
  const design = designOf(X)
  return linearOf(design, fitDesign(design, y, Uint32Array.from(y.keys()), lambda))
}

// The coefficients (design columns, the intercept last) fitted to the rows `subset` of a design.
// The loss is strictly convex, so a start (another fit's coefficients) changes only how soon
// Newton's method gets there, not where.
export const fitDesign = (
  design: Design,
  y: Float64Array,
  subset: Uint32Array,
  lambda = LAMBDA,
  start?: Float64Array,
) => {
  const { d, rows } = design
  const beta = new Float64Array(d)
  if (start) beta.set(start)
  else {
    let positives = 0
    for (const i of subset) positives += y[i]
    beta[d - 1] = Math.log(Math.max(positives, 0.5) / Math.max(subset.length - positives, 0.5))
  }
  const grad = new Float64Array(d)
  const hess = new Float64Array(d * d)
  for (let iter = 0; iter < ITERATIONS; iter++) {
    grad.fill(0)
    hess.fill(0)
    for (const i of subset) {
      const off = i * d
      let z = 0
      for (let k = 0; k < d; k++) z += beta[k] * rows[off + k]
      const p = sigmoid(z)
      const w = Math.max(p * (1 - p), 1e-10)
      const r = p - y[i]
      for (let a = 0; a < d; a++) {
        const ra = rows[off + a]
        if (ra === 0) continue
        grad[a] += r * ra
        const wa = w * ra
        const base = a * d
        for (let b = a; b < d; b++) hess[base + b] += wa * rows[off + b]
      }
    }
    for (let a = 0; a < d - 1; a++) {
      grad[a] += lambda * beta[a]
      hess[a * d + a] += lambda
    }
    for (let a = 0; a < d; a++) for (let b = 0; b < a; b++) hess[a * d + b] = hess[b * d + a]
    const step = solve(hess, grad, d)
    let largest = 0
    for (let k = 0; k < d; k++) {
      beta[k] -= step[k]
      largest = Math.max(largest, Math.abs(step[k]))
    }
    if (largest < 1e-6) break
  }
  return beta
}

// The raw score (log-odds) of row i of a design.
export const designScore = (design: Design, beta: Float64Array, i: number) => {
  let z = 0
  for (let k = 0; k < design.d; k++) z += beta[k] * design.rows[i * design.d + k]
  return z
}

export const linearOf = ({ standard, d }: Design, beta: Float64Array): Linear => {
  const m = standard.mean.length
  return {
    ...standard,
    weights: Array.from(beta.subarray(0, m)),
    flagWeights: Array.from(beta.subarray(m, d - 1)),
    intercept: beta[d - 1],
  }
}

// Solves A x = b for a symmetric positive definite A (Cholesky; a tiny ridge keeps it definite).
const solve = (A: Float64Array, b: Float64Array, d: number) => {
  const L = new Float64Array(d * d)
  for (let i = 0; i < d; i++)
    for (let j = 0; j <= i; j++) {
      let s = A[i * d + j]
      for (let k = 0; k < j; k++) s -= L[i * d + k] * L[j * d + k]
      L[i * d + j] = i === j ? Math.sqrt(Math.max(s, 1e-12)) : s / L[j * d + j]
    }
  const z = new Float64Array(d)
  for (let i = 0; i < d; i++) {
    let s = b[i]
    for (let k = 0; k < i; k++) s -= L[i * d + k] * z[k]
    z[i] = s / L[i * d + i]
  }
  const x = new Float64Array(d)
  for (let i = d - 1; i >= 0; i--) {
    let s = z[i]
    for (let k = i + 1; k < d; k++) s -= L[k * d + i] * x[k]
    x[i] = s / L[i * d + i]
  }
  return x
}

// Each source column's contribution to row i's log-odds: coefficient times deviation from the
// training mean, its missing flag's included; they sum with linearBase to the log-odds.
export const linearContributions = (model: Linear, x: (j: number) => number, columns: number) => {
  const phi = new Float64Array(columns)
  let f = 0
  for (let j = 0; j < columns; j++) {
    const v = x(j)
    const missing = Number.isNaN(v)
    // A standardized value's training mean is (1 - missing share) * 0 + missing share * 0 = 0.
    phi[j] = missing ? 0 : (model.weights[j] * (v - model.mean[j])) / model.scale[j]
    if (model.flagged[j]) {
      phi[j] += model.flagWeights[f] * ((missing ? 1 : 0) - model.flagMean[f])
      f++
    }
  }
  return phi
}
export const linearBase = (model: Linear) =>
  model.flagWeights.reduce((sum, w, f) => sum + w * model.flagMean[f], model.intercept)

export const predictLinear = (model: Linear, X: Matrix, n: number) => {
  const out = new Float64Array(n)
  const base = linearBase(model)
  for (let i = 0; i < n; i++) {
    const phi = linearContributions(model, (j) => X[j][i], X.length)
    out[i] = phi.reduce((a, b) => a + b, base)
  }
  return out
}
