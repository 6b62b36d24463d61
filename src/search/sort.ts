// Search sort: a request's sort keys checked against the fields and the account's property catalog,
// and the cursor that carries a page's last sort values to the next page. The cursor is signed
// (HMAC-SHA256) with a key the caller supplies, over the values and the search they belong to, so
// that a forged or altered cursor, or one from another account, entity or sort, is refused.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FieldError } from '../errors.ts'
import { type Defs, lookupField } from './criteria.ts'
import {
  type Entity,
  type SortSpec,
  TIMESTAMP_FIELDS,
  type ValueType,
  valueTypeOf,
} from './fields.ts'

export type SortType = ValueType | 'timestamp'
export interface SortKey {
  source: 'core' | 'attribute' | 'metric'
  name: string
  type: SortType
  descending: boolean
}

// Sets of values, not one value a record can be ordered by.
const UNSORTABLE: ReadonlySet<string> = new Set(['owner', 'tags'])

function resolveKey(entity: Entity, spec: SortSpec, at: string, defs: Defs, errors: FieldError[]) {
  const descending = spec.direction === 'desc'
  if (TIMESTAMP_FIELDS.has(spec.propertyName)) {
    return {
      source: 'core' as const,
      name: spec.propertyName,
      type: 'timestamp' as const,
      descending,
    }
  }
  const field = lookupField(entity, spec.propertyName, defs)
  if (typeof field === 'string' || UNSORTABLE.has(field.name)) {
    const why =
      typeof field === 'string' ? field : `${field.name} holds a set of values and is not sortable`
    errors.push({ path: `${at}/propertyName`, message: why })
    return undefined
  }
  return { source: field.source, name: field.name, type: valueTypeOf(field.type), descending }
}

// The request's sort keys, each problem in `errors` with its path.
export function resolveSort(
  entity: Entity,
  sort: readonly SortSpec[],
  defs: Defs,
  errors: FieldError[],
): SortKey[] {
  return sort.flatMap((spec, i) => resolveKey(entity, spec, `/sort/${i}`, defs, errors) ?? [])
}

// What a cursor is valid for: the account, the entity and the sort keys with their types (a
// property whose type changed between pages makes the old cursor's values meaningless).
export function cursorScope(
  account: number | string,
  entity: Entity,
  keys: readonly SortKey[],
): string {
  const sort = keys.map((k) => `${k.source}:${k.name}:${k.type}:${k.descending ? 'desc' : 'asc'}`)
  return [account, entity, ...sort].join('\n')
}

// A page's last record as the sort keys' values in canonical text (null for no value), then its
// external ID.
export type CursorValues = (string | null)[]

const mac = (key: Uint8Array, scope: string, body: string) =>
  createHmac('sha256', key).update(`${scope}\n${body}`).digest('base64url')

export function sealCursor(values: CursorValues, key: Uint8Array, scope: string): string {
  const body = Buffer.from(JSON.stringify(values)).toString('base64url')
  return `${body}.${mac(key, scope, body)}`
}

// The values of a cursor sealed for this scope, or undefined for anything else.
export function openCursor(
  token: string,
  key: Uint8Array,
  scope: string,
  keys: number,
): CursorValues | undefined {
  const [body, signature, ...rest] = token.split('.')
  if (rest.length > 0 || !body || !signature) return undefined
  const expected = Buffer.from(mac(key, scope, body))
  const given = Buffer.from(signature)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
  const values: unknown = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'))
  const ok =
    Array.isArray(values) &&
    values.length === keys + 1 &&
    values.every((x) => x === null || typeof x === 'string') &&
    typeof values[keys] === 'string'
  return ok ? (values as CursorValues) : undefined
}
