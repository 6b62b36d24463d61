// The one date rule and the one "today". A date is YYYY-MM-DD naming a real calendar day in the
// years 0001-9999: PostgreSQL's date has no year 0, and V8 rolls an impossible day (02-30) over
// to the next month. Every entry point checks dates with isDate; SQL that must read a stored text
// as a date uses sqlDateOrNull, and sql/011 redefines is_iso_date, both the same rule.

const SHAPE = /^\d{4}-\d{2}-\d{2}$/
const DAY_MS = 86_400_000
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

// The calendar by arithmetic, as PostgreSQL's (proleptic Gregorian): an upload checks one date per
// snapshot, and a Date object and the match's groups for each took 2.5 times as long.
export const isDate = (s: unknown): s is string => {
  if (typeof s !== 'string' || !SHAPE.test(s)) return false
  const [year, month, day] = [Number(s.slice(0, 4)), Number(s.slice(5, 7)), Number(s.slice(8))]
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const days = month === 2 && leap ? 29 : MONTH_DAYS[month - 1]
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= days
}

export const DATE_RULE = 'a date YYYY-MM-DD (a real calendar day, years 0001-9999)'

// The one time rule, for times clients send as text (Segment's timestamp and sentAt): an ISO 8601
// date-time, a date by the date rule, hh:mm with optional seconds and fraction, and a zone, Z or
// ±hh:mm. Date.parse takes much more (11/27/2026, Nov 27 2026, a zone-less time in the server's
// own zone, 24:00) and rolls 02-30 over to March. Epoch milliseconds (a fraction cut
// to them), or NaN.
const TIME_SHAPE =
  /^(\d{4}-\d{2}-\d{2})T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.(\d{1,9}))?)?(?:Z|([+-])([01]\d|2[0-3]):([0-5]\d))$/
const MINUTE_MS = 60_000

export const timeOf = (s: unknown): number => {
  const m = typeof s === 'string' ? TIME_SHAPE.exec(s) : null
  if (!m || !isDate(m[1])) return Number.NaN
  const [, date, hours, minutes, seconds = '0', fraction = '', sign, zoneHours, zoneMinutes] = m
  const offset = sign ? (sign === '-' ? -1 : 1) * (Number(zoneHours) * 60 + Number(zoneMinutes)) : 0
  return (
    dayNumber(date) * DAY_MS +
    (Number(hours) * 60 + Number(minutes) - offset) * MINUTE_MS +
    Number(seconds) * 1000 +
    Number(fraction.padEnd(3, '0').slice(0, 3))
  )
}

export const TIME_RULE = 'an ISO 8601 date-time with a zone (Z or ±hh:mm), of a real calendar day'

// The UTC date now: "today" for scoring, search (GTD, LTD), churn dates and tracking counts.
export const today = (now = Date.now()) => new Date(now).toISOString().slice(0, 10)

// Days since 1970-01-01 of a valid date.
export const dayNumber = (s: string): number => {
  const [year, month, day] = s.split('-').map(Number)
  const d = new Date(0)
  d.setUTCFullYear(year, month - 1, day)
  return Math.round(d.getTime() / DAY_MS)
}

// The date n days after a valid date (before it for a negative n), in the years 1970-9999.
export const addDays = (s: string, n: number): string =>
  new Date((dayNumber(s) + n) * DAY_MS).toISOString().slice(0, 10)

// Whole days from date a to date b; negative when b is before a.
export const daysBetween = (a: string, b: string): number => dayNumber(b) - dayNumber(a)

// The date of a text, or NULL, without ever raising a cast error (pg_input_is_valid would do, but
// needs PostgreSQL 16). The first of a valid month always casts; adding the day and printing it
// back rejects days the month does not have. `s` is written several times: keep it a cheap one.
export const sqlDateOrNull = (s: string): string => {
  const shape = `${s} ~ '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$' and ${s} !~ '^0000'`
  const roundTrip = `to_char((left(${s}, 8) || '01')::date + (right(${s}, 2)::integer - 1), 'YYYY-MM-DD') = ${s}`
  return `case when ${shape} then case when ${roundTrip} then ${s}::date end end`
}
