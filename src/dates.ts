// A date value is YYYY-MM-DD naming a real calendar day from year 1 (PostgreSQL has no year 0);
// score.ts and the search evaluator decide the same in JS.

// The date of a text, or NULL, without ever raising a cast error (pg_input_is_valid would do, but
// needs PostgreSQL 16). The first of a valid month always casts; adding the day and printing it
// back rejects days the month does not have. `s` is written several times: keep it a cheap one.
export const sqlDateOrNull = (s: string): string => {
  const shape = `${s} ~ '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$' and ${s} !~ '^0000'`
  const roundTrip = `to_char((left(${s}, 8) || '01')::date + (right(${s}, 2)::integer - 1), 'YYYY-MM-DD') = ${s}`
  return `case when ${shape} then case when ${roundTrip} then ${s}::date end end`
}
