// Generated customers of known structure for the learned churn probability (src/learn/): whether a
// customer churns is drawn from a known log-odds, so the best AUC any model can reach is known too.
import type { PropertyDef } from '../../src/property.ts'
import { addDays } from '../../src/dates.ts'
import { random } from '../../src/learn/evaluate.ts'
import type { Sample } from '../../src/learn/features.ts'

// linear: the log-odds is a weighted sum of numbers; interaction: churn follows low usage together
// with many tickets, and a threshold on seats (no line separates them); mixed: a plan category
// (with rare values), a region that is often missing, a boolean and a date.
export type Structure = 'linear' | 'interaction' | 'mixed'

export const CHURN_DEFS: PropertyDef[] = [
  { codename: 'seats', kind: 'attribute', type: 'number' },
  { codename: 'spend', kind: 'attribute', type: 'number' },
  { codename: 'nps', kind: 'attribute', type: 'number' },
  { codename: 'plan', kind: 'attribute', type: 'string' },
  { codename: 'region', kind: 'attribute', type: 'string' },
  { codename: 'has_sso', kind: 'attribute', type: 'boolean' },
  { codename: 'signed_on', kind: 'attribute', type: 'date' },
  { codename: 'logins', kind: 'metric', type: 'number' },
  { codename: 'tickets', kind: 'metric', type: 'number' },
]

export interface Generated extends Sample {
  id: string
  logit: number
}

const PLANS = ['basic', 'pro', 'enterprise', 'trial']
const REGIONS = ['eu', 'us', 'apac']

// `today`'s customers; a churned one churned within the last 60 days, and from `leak` days before
// its churn its logins drop to zero (what a model must not learn from).
export const generate = (
  n: number,
  structure: Structure,
  seed: number,
  today: string,
  options: { shuffle?: boolean; leak?: number } = {},
): Generated[] => {
  const next = random(seed)
  const normal = () => Math.sqrt(-2 * Math.log(next() + 1e-12)) * Math.cos(2 * Math.PI * next())
  const out: Generated[] = []
  for (let i = 0; i < n; i++) {
    const seats = Math.round(1 + next() * 99)
    const spend = Math.round(next() * 1000)
    const nps = Math.round(normal() * 3)
    const plan = next() < 0.03 ? `legacy-${i % 40}` : PLANS[Math.floor(next() * PLANS.length)]
    const region = next() < 0.3 ? undefined : REGIONS[Math.floor(next() * REGIONS.length)]
    const hasSso = next() < 0.5
    const age = Math.round(30 + next() * 900)
    const signedOn = addDays(today, -age)
    const logins = Math.round(next() * 40)
    const tickets = Math.round(next() * 10)
    const logit =
      structure === 'linear'
        ? -0.004 * (spend - 500) + 0.45 * nps * -1 + 0.02 * (seats - 50)
        : structure === 'interaction'
          ? (logins < 12 && tickets > 4 ? 3 : -2.2) + (seats > 70 ? 2.5 : 0)
          : ({ basic: 1, pro: -0.5, enterprise: -2, trial: 2 }[plan] ?? 2.5) +
            (region === undefined ? 1.5 : region === 'apac' ? 0.8 : -0.6) +
            (hasSso ? -1 : 0.3) -
            0.003 * (age - 450)
    const churned = next() < 1 / (1 + Math.exp(-logit))
    const churnedDate = churned ? addDays(today, -Math.round(1 + next() * 59)) : null
    const end = churnedDate ?? today
    const snapshots = [180, 150, 120, 90, 60, 30, 0].map((back) => {
      const date = addDays(end, -back)
      const dropped = options.leak !== undefined && churned && back < options.leak
      return {
        date,
        values: { logins: dropped ? 0 : Math.max(0, logins + Math.round(normal() * 2)), tickets },
      }
    })
    out.push({
      id: `c${i}`,
      logit,
      attributes: {
        seats,
        spend,
        nps,
        plan,
        ...(region ? { region } : {}),
        has_sso: hasSso,
        signed_on: signedOn,
      },
      snapshots,
      churned,
      churnedDate,
    })
  }
  if (options.shuffle) {
    const labels = out.map((s) => [s.churned, s.churnedDate] as const)
    for (let i = labels.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      ;[labels[i], labels[j]] = [labels[j], labels[i]]
    }
    out.forEach((s, i) => {
      ;[s.churned, s.churnedDate] = labels[i]
    })
  }
  return out
}
