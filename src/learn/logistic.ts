// L2-regularized logistic regression by Newton's method (iteratively reweighted least squares) on
// standardized columns. A missing value is imputed with its column's mean and flagged by a column
// of its own, so that "no value" can carry risk of its own. The intercept is not penalized.
import type { Matrix } from './features.ts'

export const sigmoid = (z: number) => (z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z)))

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

// The design matrix's value of row i for design column k: standardized columns, then flags.
const designOf = (model: Omit<Linear, 'weights' | 'flagWeights' | 'intercept'>, X: Matrix) => {
  const flags = model.flagged.flatMap((f, j) => (f ? [j] : []))
  const columns = X.map((col, j) => {
    const out = new Float64Array(col.length)
    for (let i = 0; i < col.length; i++) out[i] = Number.isNaN(col[i]) ? 0 : (col[i] - model.mean[j]) / model.scale[j]
    return out
  })
  const flagColumns = flags.map((j) => Float64Array.from(X[j], (v) => (Number.isNaN(v) ? 1 : 0)))
  return { design: [...columns, ...flagColumns], flags }
}

export const trainLinear = (X: Matrix, y: Float64Array, lambda = LAMBDA): Linear => {
  const n = y.length
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
  const { design, flags } = designOf({ mean, scale, flagged, flagMean: [] }, X)
  const flagMean = flags.map((j) => design[X.length + flags.indexOf(j)].reduce((a, b) => a + b, 0) / n)
  // Design columns plus the intercept (last).
  const d = design.length + 1
  const beta = new Float64Array(d)
  const positives = y.reduce((a, b) => a + b, 0)
  beta[d - 1] = Math.log(Math.max(positives, 0.5) / Math.max(n - positives, 0.5))
  const row = new Float64Array(d)
  for (let iter = 0; iter < ITERATIONS; iter++) {
    const grad = new Float64Array(d)
    const hess = new Float64Array(d * d)
    for (let i = 0; i < n; i++) {
      let z = beta[d - 1]
      for (let k = 0; k < d - 1; k++) {
        row[k] = design[k][i]
        z += beta[k] * row[k]
      }
      row[d - 1] = 1
      const p = sigmoid(z)
      const w = Math.max(p * (1 - p), 1e-10)
      const r = p - y[i]
      for (let a = 0; a < d; a++) {
        const ra = row[a]
        if (ra === 0) continue
        grad[a] += r * ra
        const wa = w * ra
        const base = a * d
        for (let b = a; b < d; b++) hess[base + b] += wa * row[b]
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
  return {
    mean,
    scale,
    flagged,
    weights: Array.from(beta.subarray(0, X.length)),
    flagWeights: Array.from(beta.subarray(X.length, d - 1)),
    flagMean,
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
