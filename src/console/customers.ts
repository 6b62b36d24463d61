import { html } from 'htm/preact'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import {
  accountUsers,
  type Condition,
  type Customer,
  ownerName,
  type Segment,
  type SortKey,
  searchCustomers,
  searchSegment,
  type User,
} from './api.ts'
import { describeCondition, FilterBuilder } from './filters.ts'
import { customerHref, Empty, Failed, Score, type ScoreKind, signed, When } from './format.ts'
import { useData } from './load.ts'
import { Scroller } from './scroller.ts'
import { narrow, SegmentPicker } from './segments.ts'

const PAGE = 100

type Value = string | number | null
// Each column's value (what CSV exports), where it differs how the table shows it, and the search
// field it sorts by (owner and tags hold sets and do not sort; the ID is every order's last key).
// The owner is answered as an email; the table shows the user's name where the account gave one.
interface Column {
  title: string
  value: (c: Customer) => Value
  show?: (c: Customer, users: User[] | undefined) => unknown
  num?: ScoreKind
  sort?: string
}
const COLUMNS: Column[] = [
  {
    title: 'Name',
    value: (c) => c.name,
    show: (c) => html`<a href=${customerHref(c.id)}>${c.name}</a>`,
    sort: 'name',
  },
  { title: 'ID', value: (c) => c.id },
  {
    title: 'Engagement',
    value: (c) => c.engagementscore,
    num: 'engagement',
    sort: 'engagementscore',
  },
  { title: 'Fit', value: (c) => c.fitscore, num: 'fit', sort: 'fitscore' },
  { title: 'Churn risk', value: (c) => c.churn_risk, num: 'risk', sort: 'churn_risk' },
  { title: 'Upsell', value: (c) => c.upsell_score, num: 'upsell', sort: 'upsell_score' },
  {
    title: 'Last seen',
    value: (c) => c.last_seen,
    show: (c) => html`<${When} at=${c.last_seen} />`,
    sort: 'last_seen',
  },
  {
    title: 'Owner',
    value: (c) => c.owner,
    show: (c, users) =>
      c.owner ? html`<span title=${c.owner}>${ownerName(users, c.owner)}</span>` : '–',
  },
  { title: 'Tags', value: (c) => c.tags.join(', ') },
]
// A list compared over 7 or 30 days (a movement of the home view) shows each customer's engagement
// then and now, read from the search's past engagement fields.
const pastFields = (days: 7 | 30) => [
  `engagementscore_${days}d_ago`,
  `engagementscore_change_${days}d`,
]
const compared = (days: 7 | 30): Column => {
  const [ago, change] = pastFields(days)
  const past = (c: Customer) =>
    typeof c.properties[ago] === 'number' ? (c.properties[ago] as number) : null
  return {
    title: `Engagement ${days} days ago`,
    value: past,
    show: (c) => {
      const before = past(c)
      const now = c.engagementscore
      if (before === null || now === null) return html`<${Score} kind="engagement" value=${now} />`
      return html`<span class="then-now"><${Score} kind="engagement" value=${before} /> →${' '}
        <${Score} kind="engagement" value=${now} /> <span class="diff">(${signed(now - before)})</span></span>`
    },
    sort: change,
  }
}
const shown = (column: Column, c: Customer, users: User[] | undefined) => {
  if (column.show) return column.show(c, users)
  const v = column.value(c)
  return column.num ? html`<${Score} kind=${column.num} value=${v} />` : (v ?? '–')
}

// A spreadsheet runs a cell that starts with = + - @ as a formula; text cells get a leading quote
// so that a customer's name cannot run one on the reader's machine. Numbers are left as they are.
const cell = (value: Value) => {
  if (value === null) return ''
  if (typeof value === 'number') return String(value)
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}

const toCsv = (rows: Customer[], columns: Column[]) =>
  [columns.map((c) => c.title), ...rows.map((c) => columns.map((column) => cell(column.value(c))))]
    .map((line) => line.join(','))
    .join('\r\n') + '\r\n'

const download = (rows: Customer[], columns: Column[]) => {
  const url = URL.createObjectURL(
    new Blob([toCsv(rows, columns)], { type: 'text/csv;charset=utf-8' }),
  )
  const link = Object.assign(document.createElement('a'), { href: url, download: 'customers.csv' })
  link.click()
  setTimeout(() => URL.revokeObjectURL(url), 0)
}

// A segment alone is paged through its member search; with filters or a column's order on top, the
// customer search of its condition and those (member search takes neither).
const pageOf = (
  apiKey: string,
  {
    segment,
    filters,
    sort,
    properties,
  }: { segment?: Segment; filters: Condition[]; sort?: SortKey; properties?: string[] },
  after?: number | string,
) =>
  segment && !filters.length && !sort && !properties
    ? searchSegment(apiKey, segment.id, { limit: PAGE, after })
    : searchCustomers(apiKey, {
        ...narrow(segment, filters),
        ...(sort ? { sort: [sort] } : segment?.sort ? { sort: segment.sort } : {}),
        ...(properties ? { properties } : {}),
        limit: PAGE,
        after,
        // The total once, with the first page: later pages would count the same matches again.
        ...(after === undefined ? { count: 'exact' as const } : {}),
      })

const ORDER = { asc: 'ascending', desc: 'descending' } as const

// `where` comes from the address (a number's link elsewhere in the console) and narrows whatever
// the filter builder adds. Offered as one control where the table's headers are hidden (the
// table read as cards).
const SortChoice = ({
  columns,
  sort,
  onSort,
}: {
  columns: Column[]
  sort?: SortKey
  onSort: (s?: SortKey) => void
}) =>
  html`<div class="field sort-choice">
    <label for="customers-sort">Sort by</label>
    <select id="customers-sort" value=${sort ? `${sort.propertyName}:${sort.direction ?? 'asc'}` : ''}
      onChange=${(e: Event) => {
        const [propertyName, direction] = (e.currentTarget as HTMLSelectElement).value.split(':')
        onSort(propertyName ? { propertyName, direction: direction as 'asc' | 'desc' } : undefined)
      }}>
      <option value="">ID</option>
      ${columns
        .filter((c) => c.sort)
        .flatMap((c) => [
          html`<option value=${`${c.sort}:asc`}>${c.title}, ascending</option>`,
          html`<option value=${`${c.sort}:desc`}>${c.title}, descending</option>`,
        ])}
    </select>
  </div>`

export const Customers = ({
  apiKey,
  where,
  title,
  order,
  compare,
}: {
  apiKey: string
  where?: Condition
  title?: string
  order?: SortKey
  compare?: 7 | 30
}) => {
  const [built, setFilters] = useState<Condition[]>([])
  const filters = useMemo(() => (where ? [where, ...built] : built), [where, built])
  const [total, setTotal] = useState<number | undefined>()
  const [segment, setSegment] = useState<Segment | undefined>()
  const [sort, setSort] = useState<SortKey | undefined>(order)
  const users = useData(() => accountUsers(apiKey), [apiKey])
  const all = useMemo(
    () => (compare ? [COLUMNS[0], compared(compare), ...COLUMNS.slice(1)] : COLUMNS),
    [compare],
  )
  const properties = useMemo(() => (compare ? pastFields(compare) : undefined), [compare])
  const [rows, setRows] = useState<Customer[]>([])
  const [after, setAfter] = useState<number | string | undefined>()
  // Busy from the first paint: the first page is asked for by an effect, after it.
  const [busy, setBusy] = useState(true)
  const [hidden, setHidden] = useState<string[]>([])
  const columns = all.filter((c) => !hidden.includes(c.title))
  const [error, setError] = useState('')
  // Only the latest request's answer is shown: new filters may be applied while a page is loading.
  const latest = useRef(0)

  const load = async (from: Customer[], cursor?: number | string) => {
    const request = ++latest.current
    setBusy(true)
    setError('')
    try {
      const page = await pageOf(apiKey, { segment, filters, sort, properties }, cursor)
      if (request !== latest.current) return
      setRows([...from, ...page.results])
      setAfter(page.paging?.next.after)
      if (cursor === undefined) setTotal(page.total)
    } catch (err) {
      if (request === latest.current) setError((err as Error).message)
    } finally {
      if (request === latest.current) setBusy(false)
    }
  }
  useEffect(() => {
    load([])
  }, [filters, segment, sort])
  // A click on a column's header sorts by it ascending, a second click descending.
  const sortBy = (propertyName: string) =>
    setSort({
      propertyName,
      direction: sort?.propertyName === propertyName && sort.direction === 'asc' ? 'desc' : 'asc',
    })
  const header = (c: Column) => {
    if (!c.sort) return html`<th scope="col">${c.title}</th>`
    const direction = sort?.propertyName === c.sort ? sort.direction : undefined
    return html`<th scope="col" aria-sort=${direction ? ORDER[direction] : undefined}>
      <button type="button" class="sort" onClick=${() => sortBy(c.sort!)}>
        ${c.title}
      </button>
    </th>`
  }

  return html`<section aria-labelledby="customers-title">
    <h1 id="customers-title">${title ?? 'Customers'}</h1>
    <${SegmentPicker} apiKey=${apiKey} onPick=${setSegment} />
    ${
      where &&
      html`<p class="narrowed" id="customers-where">
        ${title ? 'Only the customers counted' : `Only customers where ${describeCondition(where)}`}.${' '}
        <a href="#/customers">Show all customers</a>
      </p>`
    }
    <${FilterBuilder} apiKey=${apiKey} onApply=${setFilters} />
    ${error && html`<${Failed} error=${error} />`}
    <div class="toolbar">
      <p aria-live="polite" id="customers-count" data-count=${rows.length} data-total=${total}>
        ${
          busy
            ? 'Loading customers…'
            : `${rows.length} of ${total ?? rows.length} customers shown${after === undefined ? '' : ', more to load'}`
        }
      </p>
      <button type="button" onClick=${() => download(rows, columns)} disabled=${!rows.length}>Export CSV</button>
    </div>
    <fieldset class="inline columns-choice">
      <legend>Columns</legend>
      ${all.map(
        (c) => html`<label>
          <input type="checkbox" checked=${!hidden.includes(c.title)}
            onChange=${(e: Event) =>
              setHidden(
                (e.currentTarget as HTMLInputElement).checked
                  ? hidden.filter((t) => t !== c.title)
                  : [...hidden, c.title],
              )} />
          ${c.title}
        </label>`,
      )}
    </fieldset>
    ${!busy && !error && !rows.length && html`<${Empty}>No customer matches.</${Empty}>`}
    <${SortChoice} columns=${columns} sort=${sort} onSort=${setSort} />
    <${Scroller} label="Customers">
      <table class="cards" id="customers">
        <thead>
          <tr>${columns.map(header)}</tr>
        </thead>
        <tbody>
          ${rows.map(
            (c) => html`<tr key=${c.id}>
              ${columns.map(
                (column) =>
                  html`<td class=${column.num ? 'num' : undefined} data-label=${column.title}>${shown(
                    column,
                    c,
                    users.data,
                  )}</td>`,
              )}
            </tr>`,
          )}
        </tbody>
      </table>
    </${Scroller}>
    ${
      after !== undefined &&
      html`<button type="button" disabled=${busy} onClick=${() => load(rows, after)}>Load more</button>`
    }
  </section>`
}
