// Gradient-boosted trees for a binary label (log loss), grown on histograms as LightGBM and
// XGBoost's `hist` grow them: each column's values are cut into at most MAX_BINS quantile
// bins once, and a node's best split is found from per-bin sums of gradients and hessians, the
// larger child's sums being its parent's minus the smaller one's. A missing value (NaN) goes
// to whichever side gains more at each split. docs/scoring.md says why this is written here
// rather than taken from npm.
import type { Matrix } from './features.ts'
import { sigmoid } from './logistic.ts'

export interface TreeOptions {
  trees: number
  depth: number
  rate: number
  // L2 penalty on leaf values, and the least hessian a child may hold.
  lambda: number
  minHessian: number
}
export const TREE_OPTIONS: TreeOptions = {
  trees: 150,
  depth: 4,
  rate: 0.1,
  lambda: 1,
  minHessian: 2,
}
const MAX_BINS = 63

// A node: an inner node sends x[feature] <= threshold left (NaN by missingLeft); a leaf has value.
// cover is the number of training rows that reached it, which TreeSHAP weighs the paths by.
export interface Node {
  feature: number
  threshold: number
  missingLeft: boolean
  left: number
  right: number
  value: number
  cover: number
}
export interface Forest {
  bias: number
  trees: Node[][]
}

// Quantile cut points of a column (upper bounds of bins 1..k-1; bin 0 holds the missing values).
const cutsOf = (col: Float64Array): Float64Array => {
  const present = col.filter((v) => !Number.isNaN(v)).sort()
  const distinct: number[] = []
  for (let i = 0; i < present.length; i++)
    if (i === 0 || present[i] !== present[i - 1]) distinct.push(present[i])
  if (distinct.length <= MAX_BINS) return Float64Array.from(distinct.slice(0, -1))
  const cuts: number[] = []
  for (let b = 1; b < MAX_BINS; b++) {
    const v = present[Math.floor((b * present.length) / MAX_BINS)]
    if (cuts.length === 0 || v > cuts[cuts.length - 1]) cuts.push(v)
  }
  return Float64Array.from(cuts)
}
const binOf = (cuts: Float64Array, v: number) => {
  if (Number.isNaN(v)) return 0
  let lo = 0
  let hi = cuts.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (v <= cuts[mid]) hi = mid
    else lo = mid + 1
  }
  return lo + 1
}

interface Split {
  gain: number
  feature: number
  bin: number
  missingLeft: boolean
}

// A matrix cut into bins once: row-major (a histogram reads each row's gradient once for all its
// columns), one byte a value. The cuts are learned from the values alone, never the labels, so the
// folds of a cross-validation share one binning of all the rows.
interface Binned {
  n: number
  m: number
  bins: Uint8Array
  cuts: Float64Array[]
}
export const binMatrix = (X: Matrix): Binned => {
  const m = X.length
  const n = m ? X[0].length : 0
  const cuts = X.map(cutsOf)
  const bins = new Uint8Array(n * m)
  X.forEach((col, j) => {
    for (let i = 0; i < n; i++) bins[i * m + j] = binOf(cuts[j], col[i])
  })
  return { n, m, bins, cuts }
}

// `more`, when given, is asked after each tree whether to grow another (early stopping).
export const trainForest = (
  X: Matrix,
  y: Float64Array,
  options: TreeOptions = TREE_OPTIONS,
  more?: More,
) => {
  const data = binMatrix(X)
  return trainBinned(data, y, Uint32Array.from(y.keys()), options, more)
}

// A forest of the rows `subset` of binned data (y and the data indexed by row, whole).
export const trainBinned = (
  data: Binned,
  y: Float64Array,
  subset: Uint32Array,
  options: TreeOptions = TREE_OPTIONS,
  more?: More,
) => {
  const { m, bins, cuts } = data
  const n = subset.length
  const width = MAX_BINS + 1
  let positives = 0
  for (const i of subset) positives += y[i]
  const p0 = Math.min(Math.max(positives / n, 1e-6), 1 - 1e-6)
  const forest: Forest = { bias: Math.log(p0 / (1 - p0)), trees: [] }
  // Indexed by row; only the subset's entries are used.
  const raw = new Float64Array(data.n).fill(forest.bias)
  const g = new Float64Array(data.n)
  const h = new Float64Array(data.n)
  // The subset's rows, partitioned in place as a tree grows: a node holds rows[from, to).
  const rows = new Uint32Array(n)
  const { lambda, minHessian } = options
  const leafValue = (G: number, H: number) => (-G / (H + lambda)) * options.rate
  const score = (G: number, H: number) => (G * G) / (H + lambda)

  // Sums of g and h per (column, bin) over rows[from, to).
  const histogram = (from: number, to: number) => {
    const hist = new Float64Array(m * width * 2)
    for (let k = from; k < to; k++) {
      const i = rows[k]
      const gi = g[i]
      const hi = h[i]
      const offset = i * m
      for (let j = 0; j < m; j++) {
        const at = (j * width + bins[offset + j]) * 2
        hist[at] += gi
        hist[at + 1] += hi
      }
    }
    return hist
  }
  const bestSplit = (hist: Float64Array, G: number, H: number): Split | undefined => {
    let best: Split | undefined
    let bestGain = 1e-9
    const parent = score(G, H)
    for (let j = 0; j < m; j++) {
      const base = j * width * 2
      const gm = hist[base]
      const hm = hist[base + 1]
      let gl = 0
      let hl = 0
      const last = cuts[j].length + 1
      for (let b = 1; b < last; b++) {
        gl += hist[base + b * 2]
        hl += hist[base + b * 2 + 1]
        for (let side = 0; side < (hm > 0 ? 2 : 1); side++) {
          const GL = side ? gl + gm : gl
          const HL = side ? hl + hm : hl
          const HR = H - HL
          if (HL < minHessian || HR < minHessian) continue
          const gain = score(GL, HL) + score(G - GL, HR) - parent
          if (gain > bestGain) {
            bestGain = gain
            best = { gain, feature: j, bin: b, missingLeft: side === 1 }
          }
        }
      }
    }
    return best
  }

  const grow = (
    tree: Node[],
    from: number,
    to: number,
    hist: Float64Array,
    depth: number,
  ): number => {
    let G = 0
    let H = 0
    for (let b = 0; b < width; b++) {
      G += hist[b * 2]
      H += hist[b * 2 + 1]
    }
    const at = tree.length
    tree.push({
      feature: -1,
      threshold: 0,
      missingLeft: false,
      left: -1,
      right: -1,
      value: 0,
      cover: to - from,
    })
    const split = depth < options.depth ? bestSplit(hist, G, H) : undefined
    if (!split) {
      const value = leafValue(G, H)
      tree[at].value = value
      // The leaf's rows are known here: their scores move without walking the tree again.
      for (let k = from; k < to; k++) raw[rows[k]] += value
      return at
    }
    // Partition rows[from, to) in place: left first.
    let mid = from
    for (let k = from; k < to; k++) {
      const v = bins[rows[k] * m + split.feature]
      if (v === 0 ? split.missingLeft : v <= split.bin) {
        const t = rows[mid]
        rows[mid] = rows[k]
        rows[k] = t
        mid++
      }
    }
    // The smaller child's histogram is summed; the larger one's is its parent's minus it.
    const leftSmaller = mid - from <= to - mid
    const small = leftSmaller ? histogram(from, mid) : histogram(mid, to)
    for (let k = 0; k < hist.length; k++) hist[k] -= small[k]
    const [lh, rh] = leftSmaller ? [small, hist] : [hist, small]
    Object.assign(tree[at], {
      feature: split.feature,
      threshold: cuts[split.feature][split.bin - 1],
    })
    tree[at].missingLeft = split.missingLeft
    tree[at].left = grow(tree, from, mid, lh, depth + 1)
    tree[at].right = grow(tree, mid, to, rh, depth + 1)
    return at
  }

  for (let t = 0; t < options.trees; t++) {
    for (let k = 0; k < n; k++) {
      const i = subset[k]
      const p = sigmoid(raw[i])
      g[i] = p - y[i]
      h[i] = Math.max(p * (1 - p), 1e-12)
      rows[k] = i
    }
    const tree: Node[] = []
    grow(tree, 0, n, histogram(0, n), 0)
    forest.trees.push(tree)
    if (more && !more(forest)) break
  }
  return forest
}
export type More = (forest: Forest) => boolean

export const leafOf = (tree: Node[], X: Matrix, i: number): Node => {
  let node = tree[0]
  while (node.feature >= 0) {
    const v = X[node.feature][i]
    node = tree[(Number.isNaN(v) ? node.missingLeft : v <= node.threshold) ? node.left : node.right]
  }
  return node
}

// The raw score (log-odds) of each row, using the first `trees` trees.
export const predictForest = (
  forest: Forest,
  X: Matrix,
  n: number,
  trees = forest.trees.length,
) => {
  const out = new Float64Array(n).fill(forest.bias)
  for (const tree of forest.trees.slice(0, trees))
    for (let i = 0; i < n; i++) out[i] += leafOf(tree, X, i).value
  return out
}

// The forest's expected raw score over the training rows (the base value TreeSHAP explains from).
export const forestBase = (forest: Forest) =>
  forest.trees.reduce((sum, tree) => sum + expected(tree, 0), forest.bias)
const expected = (tree: Node[], at: number): number => {
  const node = tree[at]
  if (node.feature < 0) return node.value
  const l = tree[node.left]
  const r = tree[node.right]
  return (expected(tree, node.left) * l.cover + expected(tree, node.right) * r.cover) / node.cover
}

// Exact TreeSHAP (Lundberg, Erion and Lee 2018, Algorithm 2): each column's Shapley value for row i
// of the path-dependent conditional expectation, summing with forestBase to the raw score.
export const treeShap = (forest: Forest, x: (j: number) => number, columns: number) => {
  const phi = new Float64Array(columns)
  for (const tree of forest.trees) shapTree(tree, x, phi)
  return phi
}

interface PathElement {
  d: number
  z: number
  o: number
  w: number
}
const extend = (m: PathElement[], pz: number, po: number, pi: number) => {
  const l = m.length
  m.push({ d: pi, z: pz, o: po, w: l === 0 ? 1 : 0 })
  for (let i = l - 1; i >= 0; i--) {
    m[i + 1].w += (po * m[i].w * (i + 1)) / (l + 1)
    m[i].w = (pz * m[i].w * (l - i)) / (l + 1)
  }
}
const unwind = (m: PathElement[], i: number) => {
  const l = m.length - 1
  let n = m[l].w
  const { o, z } = m[i]
  for (let j = l - 1; j >= 0; j--) {
    if (o !== 0) {
      const t = m[j].w
      m[j].w = (n * (l + 1)) / ((j + 1) * o)
      n = t - (m[j].w * z * (l - j)) / (l + 1)
    } else {
      m[j].w = (m[j].w * (l + 1)) / (z * (l - j))
    }
  }
  for (let j = i; j < l; j++) Object.assign(m[j], { d: m[j + 1].d, z: m[j + 1].z, o: m[j + 1].o })
  m.pop()
}
const unwoundSum = (m: PathElement[], i: number) => {
  const l = m.length - 1
  const { o, z } = m[i]
  let n = m[l].w
  let total = 0
  for (let j = l - 1; j >= 0; j--) {
    if (o !== 0) {
      const t = (n * (l + 1)) / ((j + 1) * o)
      total += t
      n = m[j].w - (t * z * (l - j)) / (l + 1)
    } else {
      total += ((m[j].w / z) * (l + 1)) / (l - j)
    }
  }
  return total
}
const shapTree = (tree: Node[], x: (j: number) => number, phi: Float64Array) => {
  const recurse = (at: number, path: PathElement[], pz: number, po: number, pi: number) => {
    const m = path.map((e) => ({ ...e }))
    extend(m, pz, po, pi)
    const node = tree[at]
    if (node.feature < 0) {
      for (let i = 1; i < m.length; i++)
        phi[m[i].d] += unwoundSum(m, i) * (m[i].o - m[i].z) * node.value
      return
    }
    const v = x(node.feature)
    const goesLeft = Number.isNaN(v) ? node.missingLeft : v <= node.threshold
    const [hot, cold] = goesLeft ? [node.left, node.right] : [node.right, node.left]
    let iz = 1
    let io = 1
    const k = m.findIndex((e, i) => i > 0 && e.d === node.feature)
    if (k > 0) {
      iz = m[k].z
      io = m[k].o
      unwind(m, k)
    }
    recurse(hot, m, (iz * tree[hot].cover) / node.cover, io, node.feature)
    recurse(cold, m, (iz * tree[cold].cover) / node.cover, 0, node.feature)
  }
  recurse(0, [], 1, 1, -1)
}
