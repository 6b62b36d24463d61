// A filter's operands: the raw strings its operator takes (IN/NIN a list), each parsed into a value
// of the field's type, or a problem with its path.
import { DATE_RULE, isDate } from '../dates.ts'
import type { FieldError } from '../errors.ts'
import { UNSTORABLE } from '../validate.ts'
import { type Filter, MAX_DAYS, type Operand, type Scalar, type ValueType } from './fields.ts'

const NUMBER_PATTERN = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/

type Parsed = { value: Scalar } | { error: string }

const VALUE_PARSERS: Record<ValueType, (raw: string) => Parsed> = {
  number: (raw) =>
    NUMBER_PATTERN.test(raw) && Number.isFinite(Number(raw))
      ? { value: Number(raw) }
      : { error: 'must be a finite number' },
  date: (raw) => (isDate(raw) ? { value: raw } : { error: `must be ${DATE_RULE}` }),
  boolean: (raw) =>
    raw === 'true'
      ? { value: true }
      : raw === 'false'
        ? { value: false }
        : { error: "must be 'true' or 'false'" },
  // Rejecting what Postgres cannot hold here keeps such a value from becoming a 500.
  string: (raw) =>
    UNSTORABLE.test(raw)
      ? { error: 'must not contain NUL characters or unpaired surrogates' }
      : { value: raw },
}

function parseValue(raw: unknown, type: ValueType): Parsed {
  return typeof raw === 'string' ? VALUE_PARSERS[type](raw) : { error: 'must be a string' }
}

function parseDays(raw: unknown): Parsed {
  const ok = typeof raw === 'string' && /^\d+$/.test(raw) && Number(raw) <= MAX_DAYS
  return ok
    ? { value: Number(raw) }
    : { error: `must be a whole number of days from 0 to ${MAX_DAYS}` }
}

// The raw strings an operator takes, each with its error path. IN/NIN take `values`, or a single
// `value` when `values` is absent.
function rawOperands(
  filter: Filter,
  operand: Operand,
  at: string,
): { raw: unknown; path: string }[] | FieldError {
  if (operand === 'none') return []
  if (operand === 'many' && filter.values !== undefined) {
    const values: unknown = filter.values
    if (!Array.isArray(values) || values.length === 0)
      return { path: `${at}/values`, message: 'must be a non-empty array' }
    return values.map((raw, i) => ({ raw, path: `${at}/values/${i}` }))
  }
  if (filter.value === undefined) {
    return {
      path: operand === 'many' ? `${at}/values` : `${at}/value`,
      message: `is required for ${filter.operator}`,
    }
  }
  return [{ raw: filter.value, path: `${at}/value` }]
}

export function operandValues(
  filter: Filter,
  operand: Operand,
  type: ValueType,
  at: string,
  errors: FieldError[],
): Scalar[] {
  const raws = rawOperands(filter, operand, at)
  if (!Array.isArray(raws)) {
    errors.push(raws)
    return []
  }
  return raws.flatMap(({ raw, path }) => {
    const parsed = operand === 'days' ? parseDays(raw) : parseValue(raw, type)
    if ('value' in parsed) return [parsed.value]
    errors.push({ path, message: parsed.error })
    return []
  })
}
