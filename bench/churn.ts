// npm run bench churn: the learned churn model's training (5-fold CV of both algorithms, then the
// final fit) and scoring at 10,000 and 100,000 customers with 20 features (9 of known structure,
// test/helpers/churn-data.ts, and 11 numbers of noise), each size in a process of its own, whose
// peak RSS is the worker's cost. Bars at 100,000 (issue 48): training < 60 s, scoring < 10 s,
// RSS < 400 MB.
import { execFileSync } from 'node:child_process'
import { churnProbabilities, trainChurnMatrix } from '../src/learn/churn.ts'
import { random } from '../src/learn/evaluate.ts'
import { matrixReader } from '../src/learn/features.ts'
import { CHURN_DEFS, generate } from '../test/helpers/churn-data.ts'
import type { BenchContext } from './lib.ts'

const SIZES = (process.env.BENCH_CHURN_SIZES ?? '10000,100000').split(',').map(Number)
const NOISE = Array.from({ length: 11 }, (_, i) => `noise_${i}`)

// Customers come page by page, as the worker reads them (src/churn/train.ts), so that the RSS is
// the worker's: a page's samples are dropped once read into the matrix.
const PAGE = 5000
const pageOf = (n: number, from: number, today: string) => {
  const next = random(11 + from)
  const samples = generate(Math.min(PAGE, n - from), 'interaction', 1 + from, today)
  for (const s of samples) for (const f of NOISE) s.attributes[f] = next()
  return samples
}
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const { user, system } = process.cpuUsage(since)
  return (user + system) / 1e6
}

const child = (n: number) => {
  const today = new Date().toISOString().slice(0, 10)
  const defs = [
    ...CHURN_DEFS,
    ...NOISE.map((codename) => ({ codename, kind: 'attribute' as const, type: 'number' as const })),
  ]
  // Training: the read into the matrix (generating the pages is not counted), then the learning.
  const reader = matrixReader(defs, today, 30)
  let training = 0
  let trainingCpu = 0
  for (let from = 0; from < n; from += PAGE) {
    const page = pageOf(n, from, today)
    const t = performance.now()
    const c = process.cpuUsage()
    reader.add(page)
    training += performance.now() - t
    trainingCpu += cpuSeconds(c)
  }
  let t = performance.now()
  let cpu = process.cpuUsage()
  const trained = trainChurnMatrix(reader.finish(), {})
  training += performance.now() - t
  trainingCpu += cpuSeconds(cpu)
  // Scoring: customers as they are processed, page by page from their samples.
  let scoring = 0
  let scoringCpu = 0
  for (let from = 0; from < n; from += PAGE) {
    const page = pageOf(n, from, today)
    t = performance.now()
    cpu = process.cpuUsage()
    churnProbabilities(trained.model, page, today)
    scoring += performance.now() - t
    scoringCpu += cpuSeconds(cpu)
  }
  const rss = process.resourceUsage().maxRSS / 1024
  const { auc } = trained.evaluation
  const { algorithm } = trained.model
  process.stdout.write(
    JSON.stringify({ training, trainingCpu, scoring, scoringCpu, rss, auc, algorithm }),
  )
}

if (process.env.BENCH_CHURN_CHILD) child(Number(process.env.BENCH_CHURN_CHILD))

export default async (ctx: BenchContext) => {
  for (const n of SIZES) {
    const out = execFileSync(process.execPath, ['--import', 'tsx', 'bench/churn.ts'], {
      env: { ...process.env, BENCH_CHURN_CHILD: String(n) },
      encoding: 'utf8',
      maxBuffer: 1 << 20,
    })
    const r = JSON.parse(out)
    const big = n >= 100_000
    ctx.report({
      bench: 'churn',
      metric: `training, ${n} customers x 20 features`,
      value: r.training / 1000,
      unit: 's',
      ...(big ? { target: '< 60' } : {}),
    })
    ctx.report({
      bench: 'churn',
      metric: `training CPU, ${n} customers`,
      value: r.trainingCpu,
      unit: 's',
    })
    ctx.report({
      bench: 'churn',
      metric: `scoring, ${n} customers`,
      value: r.scoring / 1000,
      unit: 's',
      ...(big ? { target: '< 10' } : {}),
    })
    ctx.report({
      bench: 'churn',
      metric: `scoring CPU, ${n} customers`,
      value: r.scoringCpu,
      unit: 's',
    })
    ctx.report({
      bench: 'churn',
      metric: `peak RSS, ${n} customers`,
      value: r.rss,
      unit: 'MB',
      ...(big ? { target: '< 400' } : {}),
    })
    ctx.report({
      bench: 'churn',
      metric: `CV AUC (${r.algorithm}), ${n} customers`,
      value: r.auc,
      unit: '',
    })
  }
}
