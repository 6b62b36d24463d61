import { html } from 'htm/preact'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { type Condition, type Customer, type Segment, type SortKey, searchCustomers, searchSegment } from './api.ts'
import { describeCondition, FilterBuilder } from './filters.ts'
import { customerHref, Empty, Failed, Score, type ScoreKind, When } from './format.ts'
import { narrow, SegmentPicker } from './segments.ts'

const PAGE = 100

type Value = string | number | null
// Each column's value (what CSV exports), where it differs how the table shows it, and the search
// field it sorts by (owner and tags hold sets and do not sort; the ID is every order's last key).
const COLUMNS: {
  title: string
  value: (c: Customer) => Value
  show?: (c: Customer) => unknown
  num?: ScoreKind
  sort?: string
}[] = [
  {
    title: 'Name',
    value: (c) => c.name,
    show: (c) => html`<a href=${customerHref(c.id)}>${c.name}</a>`,
    sort: 'name',
  },
  { title: 'ID', value: (c) => c.id },
  { title: 'Engagement', value: (c) => c.engagementscore, num: 'engagement', sort: 'engagementscore' },
  { title: 'Fit', value: (c) => c.fitscore, num: 'fit', sort: 'fitscore' },
  { title: 'Churn risk', value: (c) => c.churn_risk, num: 'risk', sort: 'churn_risk' },
  { title: 'Upsell', value: (c) => c.upsell_score, num: 'upsell', sort: 'upsell_score' },
  {
    title: 'Last seen',
    value: (c) => c.last_seen,
    show: (c) => html`<${When} at=${c.last_seen} />`,
    sort: 'last_seen',
  },
  { title: 'Owner', value: (c) => c.owner },
  { title: 'Tags', value: (c) => c.tags.join(', ') },
]
type Column = (typeof COLUMNS)[number]
const shown = (column: Column, c: Customer) => {
  if (column.show) return column.show(c)
  const v = column.value(c)
  return column.num ? html`<${Score} kind=${column.num} value=${v} />` : (v ?? '–')
}

// A spreadsheet runs a cell that starts with = + - @ as a formula; text cells get a leading quote so
// that a customer's name cannot run one on the reader's machine. Numbers are left as they are.
const cell = (value: Value) => {
  if (value === null) return ''
  if (typeof value === 'number') return String(value)
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}

export const toCsv = (rows: Customer[], columns: Column[]) =>
  [columns.map((c) => c.title), ...rows.map((c) => columns.map((column) => cell(column.value(c))))]
    .map((line) => line.join(','))
    .join('\r\n') + '\r\n'

const download = (rows: Customer[], columns: Column[]) => {
  const url = URL.createObjectURL(new Blob([toCsv(rows, columns)], { type: 'text/csv;charset=utf-8' }))
  const link = Object.assign(document.createElement('a'), { href: url, download: 'customers.csv' })
  link.click()
  setTimeout(() => URL.revokeObjectURL(url), 0)
}

// A segment alone is paged through its member search; with filters or a column's order on top, the
// customer search of its condition and those (member search takes neither).
const pageOf = (
  apiKey: string,
  { segment, filters, sort }: { segment?: Segment; filters: Condition[]; sort?: SortKey },
  after?: number | string,
) =>
  segment && !filters.length && !sort
    ? searchSegment(apiKey, segment.id, { limit: PAGE, after })
    : searchCustomers(apiKey, {
        ...narrow(segment, filters),
        ...(sort ? { sort: [sort] } : segment?.sort ? { sort: segment.sort } : {}),
        limit: PAGE,
        after,
        // The total once, with the first page: later pages would count the same matches again.
        ...(after === undefined ? { count: 'exact' as const } : {}),
      })

const ORDER = { asc: 'ascending', desc: 'descending' } as const

// `where` comes from the address (a number's link elsewhere in the console) and narrows whatever the
// filter builder adds.
export const Customers = ({ apiKey, where }: { apiKey: string; where?: Condition }) => {
  const [built, setFilters] = useState<Condition[]>([])
  const filters = useMemo(() => (where ? [where, ...built] : built), [where, built])
  const [total, setTotal] = useState<number | undefined>()
  const [segment, setSegment] = useState<Segment | undefined>()
  const [sort, setSort] = useState<SortKey | undefined>()
  const [rows, setRows] = useState<Customer[]>([])
  const [after, setAfter] = useState<number | string | undefined>()
  const [busy, setBusy] = useState(false)
  const [hidden, setHidden] = useState<string[]>([])
  const columns = COLUMNS.filter((c) => !hidden.includes(c.title))
  const [error, setError] = useState('')
  // Only the latest request's answer is shown: new filters may be applied while a page is loading.
  const latest = useRef(0)

  const load = async (from: Customer[], cursor?: number | string) => {
    const request = ++latest.current
    setBusy(true)
    setError('')
    try {
      const page = await pageOf(apiKey, { segment, filters, sort }, cursor)
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
    <h1 id="customers-title">Customers</h1>
    <${SegmentPicker} apiKey=${apiKey} onPick=${setSegment} />
    ${
      where &&
      html`<p class="narrowed" id="customers-where">
        Only customers where ${describeCondition(where)}. <a href="#/customers">Show all customers</a>
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
      ${COLUMNS.map(
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
    <div class="table-wrap" tabindex="0">
      <table class="cards" id="customers">
        <thead>
          <tr>${columns.map(header)}</tr>
        </thead>
        <tbody>
          ${rows.map(
            (c) => html`<tr key=${c.id}>
              ${columns.map(
                (column) =>
                  html`<td class=${column.num ? 'num' : undefined} data-label=${column.title}>${shown(column, c)}</td>`,
              )}
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${
      after !== undefined &&
      html`<button type="button" disabled=${busy} onClick=${() => load(rows, after)}>Load more</button>`
    }
  </section>`
}
