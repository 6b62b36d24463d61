import { html } from 'htm/preact'

export const customerHref = (id: string) => `#/customer/${encodeURIComponent(id)}`
// The customers list narrowed to a condition of the search API's `where` tree (docs/api.md,
// "Trees"): how the home view and the matrix link each number to the customers behind it. A
// list may carry a title in words, its order ("engagementscore_change_7d:asc") and the days its
// engagement is compared over (the list then shows each customer's engagement then and now).
export interface ListOptions {
  title?: string
  order?: string
  compare?: 7 | 30
}
export const customersHref = (where?: unknown, options: ListOptions = {}) => {
  if (where === undefined) return '#/customers'
  const query = new URLSearchParams({ where: JSON.stringify(where) })
  if (options.title) query.set('title', options.title)
  if (options.order) query.set('order', options.order)
  if (options.compare) query.set('compare', String(options.compare))
  return `#/customers?${query.toString().replaceAll('+', '%20')}`
}

// 5 MB, 32 KB: a file's size in the binary units the service's messages and `service backup` use
// (src/validate.ts's size(), which browser code cannot import).
export const fileSize = (bytes: number) => {
  const [unit, scale] =
    bytes >= 1024 ** 2 ? ['MB', 1024 ** 2] : bytes >= 1024 ? ['KB', 1024] : ['bytes', 1]
  return `${Number((bytes / scale).toFixed(1))} ${unit}`
}

export const score = (value: number | null) => (value === null ? '–' : String(value))

// A probability (0..1) as a percentage to a tenth: the learned churn probability, its calibration.
export const percent = (p: number) => `${Math.round(p * 1000) / 10}%`

export const signed = (value: number) => (value > 0 ? `+${value}` : value < 0 ? `−${-value}` : '±0')

// Green (no risk) through amber to red (certain churn); grey until scored. At 33% lightness every
// hue keeps 3.2:1 or more against the white plot (the grey 4.5:1), as non-text contrast asks.
export const riskColour = (risk: number | null) =>
  risk === null ? 'hsl(0 0% 46%)' : `hsl(${Math.round(130 - 1.3 * risk)} 75% 33%)`

// A score's band: engagement and fit run -100..100, churn risk and upsell 0..100, and for churn
// risk high is bad. Engagement below 0 is the service's churn risk (the matrix's and the home
// view's quadrant, docs/api.md "This week"), and fit below 0 its poor fit: so below 0 is poor, and
// a badge agrees with the list it stands in. Colour alone would fail readers who cannot tell green
// from red, so each band also has its own shape and word.
export type ScoreKind = 'engagement' | 'fit' | 'risk' | 'upsell'
type Band = 'good' | 'fair' | 'poor' | 'none'
export const CHURN_RISK_BELOW = 0
const BANDS: Record<ScoreKind, [low: number, high: number]> = {
  engagement: [CHURN_RISK_BELOW, 30],
  fit: [CHURN_RISK_BELOW, 30],
  risk: [35, 65],
  upsell: [35, 65],
}
export const band = (kind: ScoreKind, value: number | null): Band => {
  if (value === null) return 'none'
  const [low, high] = BANDS[kind]
  const good = kind === 'risk' ? value < low : value >= high
  const poor = kind === 'risk' ? value >= high : value < low
  return good ? 'good' : poor ? 'poor' : 'fair'
}
const SHAPES: Record<Band, string> = { good: '●', fair: '◆', poor: '▲', none: '○' }
export const Score = ({ kind, value }: { kind: ScoreKind; value: number | null }) => {
  const b = band(kind, value)
  return html`<span class=${`score score-${b}`}>
    <span aria-hidden="true">${SHAPES[b]}</span> ${score(value)}${' '}
    <span class="visually-hidden">(${b === 'none' ? 'not scored' : b})</span>
  </span>`
}

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['year', 365 * 86_400],
  ['month', 30 * 86_400],
  ['week', 7 * 86_400],
  ['day', 86_400],
  ['hour', 3600],
  ['minute', 60],
  ['second', 1],
]
const relative = new Intl.RelativeTimeFormat('en', { numeric: 'auto' })
const absolute = new Intl.DateTimeFormat('en-GB', {
  dateStyle: 'medium',
  timeStyle: 'short',
  timeZone: 'UTC',
})
const dateOnly = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeZone: 'UTC' })
// A day is said in days at the finest ("today", "3 days ago"), a time down to seconds.
const DAY_UNITS = UNITS.filter(([unit]) => unit === 'year' || unit === 'month' || unit === 'day')
export const ago = (at: Date, now = Date.now(), units = UNITS) => {
  const seconds = (at.getTime() - now) / 1000
  const [unit, size] = units.find(([, s]) => Math.abs(seconds) >= s) ?? units[units.length - 1]
  return relative.format(Math.round(seconds / size), unit)
}
// A time as people say it ("3 days ago"), the exact one (UTC) on hover and on keyboard focus;
// a date without a time (YYYY-MM-DD) is a day, not midnight, so it reads "today" rather
// than "5 hours ago".
export const When = ({ at, none = '–' }: { at: string | null | undefined; none?: string }) => {
  if (!at) return none
  const day = /^\d{4}-\d{2}-\d{2}$/.test(at)
  const date = new Date(at)
  if (Number.isNaN(date.getTime())) return at
  const exact = day ? dateOnly.format(date) : `${absolute.format(date)} UTC`
  const said = day
    ? ago(date, Date.parse(new Date().toISOString().slice(0, 10)), DAY_UNITS)
    : ago(date)
  return html`<time class="when" datetime=${at} title=${exact} data-exact=${exact} tabindex="0">${said}</time>`
}

// A day as a date ("1 Mar 2027"), where a sentence needs a date rather than "in 3 months".
export const Day = ({ at }: { at: string }) =>
  html`<time datetime=${at}>${dateOnly.format(new Date(at))}</time>`

// A link within the page that moves the focus to the element of that id (which takes it: tabindex
// -1) and scrolls it into view, leaving the fragment, which names the view, as it is.
export const focusOn = (id: string) => (e: Event) => {
  e.preventDefault()
  document.getElementById(id)?.focus()
}

// What every view shows while it waits, when it has nothing, and when the service refused.
export const Loading = ({ what = '' }: { what?: string }) =>
  html`<p class="state state-loading" role="status">
    <span class="spinner" aria-hidden="true"></span>Loading${what && ` ${what}`}…
  </p>`
export const Empty = ({ children }: { children: unknown }) =>
  html`<p class="state state-empty">${children}</p>`
export const Failed = ({ error }: { error: string }) =>
  html`<p role="alert" class="state state-error">${error}</p>`
// What the service refused, beside the form or list it concerns; nothing when it refused nothing.
export const errorLine = (text: string) => text && html`<p role="alert" class="error">${text}</p>`
