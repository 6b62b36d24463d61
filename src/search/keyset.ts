// Sorted pages (keyset paging): a sort key's value, the records after a cursor's values, and the
// index walk of a page whose first key has an index.
import { TABLES } from '../db/tables.ts'
import { FRACTIONS, type Field, TIMESTAMP_FIELDS } from './fields.ts'
import { type Ctx, fieldSql, SQL_TYPES, type SqlType } from './predicates.ts'
import type { CursorValues, SortKey, SortType } from './sort.ts'

// A sort key's value for the record `r` (its scores `h`, a contact's customer `oc`). Strings order
// by their bytes, as external IDs do.
export function keySql(key: SortKey, ctx: Ctx): string {
  if (key.type === 'timestamp') return `r.${TIMESTAMP_FIELDS.get(key.name)}`
  const value = fieldSql({ source: key.source, name: key.name, type: key.type } as Field, ctx)
  return key.type === 'string' ? `(${value} collate "C")` : value
}

// A key's value as the cursor carries it: text that casts back to the same value.
export const KEY_TEXT: Record<SortType, (v: string) => string> = {
  timestamp: (v) => `to_char(${v} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
  date: (v) => `to_char(${v}, 'YYYY-MM-DD')`,
  number: (v) => `${v}::text`,
  boolean: (v) => `${v}::text`,
  string: (v) => v,
}
const KEY_TYPES: Record<SortType, SqlType> = { ...SQL_TYPES, timestamp: 'timestamptz' }

// The core scores are integer columns, compared as such (as filters compare them).
const bindKey = (key: SortKey, value: string, ctx: Ctx) =>
  ctx.bind(
    value,
    key.source === 'core' && key.type === 'number' && !FRACTIONS.has(key.name)
      ? 'bigint'
      : KEY_TYPES[key.type],
  )

// The records after the cursor's in the order: key by key, a greater value in the key's direction,
// or (nulls last either way) a null after a value, or an equal one (null after null) and after on
// the keys that follow; the external ID (`id`) decides last.
export function afterKeysSql(
  keys: readonly SortKey[],
  values: CursorValues,
  ctx: Ctx,
  id = 'r.external_id',
): string {
  const last = `${id} > ${ctx.bind(values[keys.length]!, 'text')}`
  return keys.reduceRight((rest, key, i) => {
    const [value, bound] = [keySql(key, ctx), values[i]]
    if (bound === null) return `(${value} is null and ${rest})`
    const x = bindKey(key, bound, ctx)
    return `(${value} is null or ${value} ${key.descending ? '<' : '>'} ${x} or (${value} = ${x} and ${rest}))`
  }, last)
}

// The core keys with an index on (account_id, key, external_id) (sql/020_sort_indexes.sql, and
// sql/050_churn_model.sql for the learned churn probability).
const INDEXED_KEYS: ReadonlySet<string> = new Set([
  'engagementscore',
  'fitscore',
  'churn_risk',
  'churn_probability',
  'last_seen',
  'name',
  'createdAt',
  'updatedAt',
])
export const indexedFirst = (keys: readonly SortKey[]) =>
  keys.length > 0 && keys[0].source === 'core' && INDEXED_KEYS.has(keys[0].name)

// A page whose first key has an index, as a `union all` of index ranges that Append runs in turn,
// each part cut to the page (its own placement of nulls needs none, as they hold none): the rest of
// the cursor's tie (its value, after it on the keys that follow), the records beyond the cursor's
// value and, only on the last pages, those without one. A score key is walked with the score row's
// copy of the external ID, so that the index orders a tie without reading the records.
//
// The index is ascending only (one index per direction would double what every write of a score,
// name or timestamp costs). Walked backwards for a descending key, it gives a tie's external IDs
// descending, so the walk has to read a whole tie to sort it. The next NEXT_TIES values beyond are
// therefore read tie by tie, each forwards from the index (`key = the next value`, found by an
// index probe), and only the records beyond them by the backward walk: a page reads a whole tie
// only when it spans more than NEXT_TIES smaller ones first.
const NEXT_TIES = 2

export function splitPage(
  keys: readonly SortKey[],
  after: CursorValues | undefined,
  ctx: Ctx,
  cut: (conditions: string[], orderBy: string[]) => string,
  limit: string,
): string {
  const [first, value] = [keys[0], keySql(keys[0], ctx)]
  const direction = first.descending ? 'desc' : 'asc'
  const rest = keys.slice(1)
  const tie = (id: string) => [
    ...rest.map((k, i) => `sort_${i + 1} ${k.descending ? 'desc' : 'asc'} nulls last`),
    id,
  ]
  const tieAfter = (id: string) => (after ? [afterKeysSql(rest, after.slice(1), ctx, id)] : [])
  const alias = value.startsWith('h.') ? 'h' : 'r'
  const id = `${alias}.external_id`
  const parts: string[] = []
  let from: string | undefined
  if (after?.[0] != null) {
    from = bindKey(first, after[0], ctx)
    parts.push(cut([`${value} = ${from}`, ...tieAfter(id)], tie(id)))
  }
  if (after?.[0] !== null) {
    if (first.descending && rest.length === 0) {
      const table = TABLES[ctx.entity][alias === 'h' ? 'scores' : 'records']
      const next = value.replace(`${alias}.`, 'n.')
      for (let i = 0; i < NEXT_TIES; i++) {
        const below = from === undefined ? '' : ` and ${next} < ${from}`
        from = `(select max(${next}) from ${table} n where n.account_id = ${ctx.account}${below})`
        parts.push(cut([`${value} = ${from}`], [id]))
      }
    }
    const beyond = from === undefined ? 'is not null' : `${first.descending ? '<' : '>'} ${from}`
    parts.push(cut([`${value} ${beyond}`], [`sort_0 ${direction}`, ...tie(id)]))
  }
  // After a cursor with a value, all of them; a record without a score row has no copy
  // of its external ID.
  parts.push(
    cut(
      [`${value} is null`, ...(after?.[0] === null ? tieAfter('r.external_id') : [])],
      tie('r.external_id'),
    ),
  )
  return parts.length === 1
    ? parts[0]
    : `${parts.map((p) => `(${p})`).join('\nunion all\n')}\nlimit ${limit}`
}
