import { daysBetween, isDate } from '../../dates.ts'
import type { ChangeDriver } from './alerts.ts'
import type { PropertyType } from '../../property.ts'
import { isBooleanRule, isValuesRule, type RangeRule, type Rule } from './model.ts'

// The scoring rules of docs/scoring.md. propertyScore, weightedScore, churnRisk and upsellScore
// have twins in sql.ts for bulk scoring in PostgreSQL; both do the same float8 operations in the
// same order so that the two agree.

// A type, not an interface: it is stored as JSON (scoring/changes.ts).
export type Contribution = {
  codename: string
  contribution: number
}
export interface Driver extends Contribution {
  score: 'engagement' | 'fit'
}
interface WeightedScore {
  score: number | null
  contributions: Contribution[]
}
interface HistoryRecord {
  date: string
  score: number | null
}
interface HistorySummary {
  last_seen: string | null
  engagementscore: number | null
  engagementscore_difference: number | null
  engagementscore_trend: Record<string, number> | null
}
export interface Explanation {
  engagement: Contribution[]
  fit: Contribution[]
  risk_drivers: Driver[]
  health_drivers: Driver[]
}

const TREND_DAYS = 365
const TREND_RECORDS = 15
const DRIVERS = 3

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

// Scores are rounded half away from zero (JS Math.round(-2.5) would give -2), with float noise
// up to 1e-9 absorbed, so that 2.4999999999999996 from (0.1 + 0.2) * ... counts as 2.5. Only
// float8 operations that PostgreSQL performs identically (abs, +, floor), so roundSql in sql.ts
// gives the same integer; round(x::numeric) did too, at eight times the cost per snapshot. The
// `r !== 0` test keeps -0 out of results, since assertions and Object.is tell it apart from 0.
export const ROUND_NOISE = 1e-9
export const roundHalfAway = (x: number): number => {
  const r = Math.floor(Math.abs(x) + 0.5 + ROUND_NOISE)
  return x < 0 && r !== 0 ? -r : r
}

const round2 = (x: number) => roundHalfAway(x * 100) / 100

// clamp(-100 + 200 * (v - bad) / (good - bad)), computed so that sql.ts can do the same in float8
// without PostgreSQL's overflow and underflow errors: a value at or past `good` or `bad` scores
// ±100 before any arithmetic (the formula would overflow for huge values), and so does a value so
// close to `bad` that the quotient would vanish next to -100 anyway (it could underflow). A value
// exactly at `good` thus scores 100 even where the float formula would give 99.99999999999997.
const rangeScore = ({ bad, good }: RangeRule, v: number): number => {
  const span = good - bad
  if (span > 0 ? v >= good : v <= good) return 100
  if (span > 0 ? v <= bad : v >= bad) return -100
  if (Math.abs(v - bad) * 1e20 < Math.abs(span)) return -100
  return clamp(-100 + (200 * (v - bad)) / span, -100, 100)
}

// A value of the wrong JSON type (e.g. a string stored under a number metric) counts as missing,
// as in sql.ts, rather than failing the whole record; so does a stored number no double holds,
// which JSON.parse reads as Infinity (sql.ts, tolerant).
export const propertyScore = (
  rule: Rule,
  value: unknown,
  scoringDate: string,
  type: PropertyType,
): number | null => {
  if (isValuesRule(rule)) {
    if (typeof value !== 'string') return null
    // hasOwn: a value such as "toString" must not pick up Object.prototype members.
    return Object.hasOwn(rule.values, value) ? rule.values[value] : (rule.default ?? 0)
  }
  if (isBooleanRule(rule))
    return typeof value === 'boolean' ? (value === rule.good ? 100 : -100) : null
  if (type === 'date')
    return isDate(value) ? rangeScore(rule, daysBetween(scoringDate, value)) : null
  return typeof value === 'number' && Number.isFinite(value) ? rangeScore(rule, value) : null
}

export const weightedScore = (
  rules: readonly Rule[],
  valueOf: (codename: string) => unknown,
  scoringDate: string,
  typeOf: (codename: string) => PropertyType,
): WeightedScore => {
  const scored = rules.flatMap((rule) => {
    const p = propertyScore(rule, valueOf(rule.codename), scoringDate, typeOf(rule.codename))
    return p === null ? [] : [{ codename: rule.codename, weight: rule.weight, wp: rule.weight * p }]
  })
  if (scored.length === 0) return { score: null, contributions: [] }
  const totalWeight = scored.reduce((sum, r) => sum + r.weight, 0)
  const total = scored.reduce((sum, r) => sum + r.wp, 0)
  return {
    score: roundHalfAway(total / totalWeight),
    contributions: scored.map((r) => ({ codename: r.codename, contribution: r.wp / totalWeight })),
  }
}

const trendInputs = (f: number | null, d: number | null) => ({
  f: f ?? 0,
  d: clamp(d ?? 0, -100, 100),
})

// A last_seen in the future (a snapshot dated ahead) counts as seen today: s is at least 0.
export const churnRisk = (
  e: number | null,
  f: number | null,
  d: number | null,
  daysSinceLastSeen: number,
): number | null => {
  if (e === null) return null
  const x = trendInputs(f, d)
  const s = clamp(daysSinceLastSeen, 0, 90)
  return clamp(roundHalfAway(50 - 0.35 * e - 0.15 * x.f - 0.3 * x.d + (20 * s) / 90), 0, 100)
}

export const upsellScore = (
  e: number | null,
  f: number | null,
  d: number | null,
): number | null => {
  if (e === null) return null
  const x = trendInputs(f, d)
  return clamp(roundHalfAway(50 + 0.3 * e + 0.2 * x.f + 0.15 * x.d), 0, 100)
}

export const summarizeHistory = (
  records: readonly HistoryRecord[],
  today: string,
): HistorySummary => {
  const scored = records
    .filter((r): r is { date: string; score: number } => r.score !== null)
    .sort((a, b) => (a.date < b.date ? -1 : a.date > b.date ? 1 : 0))
  const last = scored.at(-1)
  if (!last)
    return {
      last_seen: null,
      engagementscore: null,
      engagementscore_difference: null,
      engagementscore_trend: null,
    }
  const previous = scored.at(-2)
  // "Within 365 days before today": today - 365 < date <= today.
  const recent = scored
    .filter((r) => {
      const age = daysBetween(r.date, today)
      return age >= 0 && age < TREND_DAYS
    })
    .slice(-TREND_RECORDS)
  return {
    last_seen: last.date,
    engagementscore: last.score,
    engagementscore_difference: previous ? last.score - previous.score : null,
    engagementscore_trend: recent.length
      ? Object.fromEntries(recent.map((r) => [r.date, r.score]))
      : null,
  }
}

const drivers = (all: Driver[], sign: 1 | -1) =>
  all
    .filter((c) => sign * c.contribution > 0)
    .sort((a, b) => sign * (b.contribution - a.contribution))
    .slice(0, DRIVERS)

export type Contributions = Pick<Explanation, 'engagement' | 'fit'>

// "Why did it move": the properties whose contributions moved most between two scorings, largest
// move first; a property absent from one side contributed 0 there.
export const changeDrivers = (before: Contributions, after: Contributions): ChangeDriver[] =>
  (['engagement', 'fit'] as const)
    .flatMap((score) => {
      const was = new Map(before[score].map((c) => [c.codename, c.contribution]))
      const now = new Map(after[score].map((c) => [c.codename, c.contribution]))
      return [...new Set([...was.keys(), ...now.keys()])].map((codename) => ({
        score,
        codename,
        before: was.get(codename) ?? 0,
        after: now.get(codename) ?? 0,
      }))
    })
    .filter((d) => d.before !== d.after)
    .sort((a, b) => Math.abs(b.after - b.before) - Math.abs(a.after - a.before))
    .slice(0, DRIVERS)

// Drivers are picked on the rounded contributions so that a driver never shows as 0.
export const explain = (
  engagement: readonly Contribution[],
  fit: readonly Contribution[],
): Explanation => {
  const rounded = (cs: readonly Contribution[]) =>
    cs.map((c) => ({ codename: c.codename, contribution: round2(c.contribution) }))
  const e = rounded(engagement)
  const f = rounded(fit)
  const all: Driver[] = [
    ...e.map((c) => ({
      codename: c.codename,
      score: 'engagement' as const,
      contribution: c.contribution,
    })),
    ...f.map((c) => ({
      codename: c.codename,
      score: 'fit' as const,
      contribution: c.contribution,
    })),
  ]
  return { engagement: e, fit: f, risk_drivers: drivers(all, -1), health_drivers: drivers(all, 1) }
}
