// npm run bench churn: the learned churn model's training (5-fold CV of both algorithms, then the
// final fit) and scoring at 10,000 and 100,000 customers with 20 features (9 of known structure,
// test/helpers/churn-data.ts, and 11 numbers of noise), each size in a process of its own, whose
// peak RSS is the worker's cost. Bars at 100,000 (issue 48): training < 60 s, scoring < 10 s,
// RSS < 400 MB.
import { execFileSync } from 'node:child_process'
import { churnProbabilities, trainChurnModel } from '../src/learn/churn.ts'
import { random } from '../src/learn/evaluate.ts'
import { CHURN_DEFS, generate } from '../test/helpers/churn-data.ts'
import type { BenchContext } from './lib.ts'

const SIZES = (process.env.BENCH_CHURN_SIZES ?? '10000,100000').split(',').map(Number)
const NOISE = Array.from({ length: 11 }, (_, i) => `noise_${i}`)

const child = (n: number) => {
  const today = new Date().toISOString().slice(0, 10)
  const next = random(11)
  const samples = generate(n, 'interaction', 1, today)
  for (const s of samples) for (const f of NOISE) s.attributes[f] = next()
  const defs = [
    ...CHURN_DEFS,
    ...NOISE.map((codename) => ({ codename, kind: 'attribute' as const, type: 'number' as const })),
  ]
  let t = performance.now()
  const trained = trainChurnModel(defs, samples, { today, leadDays: 30 })
  const training = performance.now() - t
  t = performance.now()
  churnProbabilities(trained.model, samples, today)
  const scoring = performance.now() - t
  const rss = process.resourceUsage().maxRSS / 1024
  process.stdout.write(
    JSON.stringify({ training, scoring, rss, auc: trained.evaluation.auc, algorithm: trained.model.algorithm }),
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
      metric: `scoring, ${n} customers`,
      value: r.scoring / 1000,
      unit: 's',
      ...(big ? { target: '< 10' } : {}),
    })
    ctx.report({
      bench: 'churn',
      metric: `peak RSS, ${n} customers`,
      value: r.rss,
      unit: 'MB',
      ...(big ? { target: '< 400' } : {}),
    })
    ctx.report({ bench: 'churn', metric: `CV AUC (${r.algorithm}), ${n} customers`, value: r.auc, unit: '' })
  }
}
