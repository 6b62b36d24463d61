import { html } from 'htm/preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { type Customer, type Filter, searchCustomers } from './api.ts'
import { FilterBuilder } from './filters.ts'
import { customerHref, score } from './format.ts'

const PAGE = 100

const COLUMNS: [title: string, value: (c: Customer) => string | number | null][] = [
  ['Name', (c) => c.name],
  ['ID', (c) => c.id],
  ['Engagement', (c) => c.engagementscore],
  ['Fit', (c) => c.fitscore],
  ['Churn risk', (c) => c.churn_risk],
  ['Upsell', (c) => c.upsell_score],
  ['Last seen', (c) => c.last_seen],
  ['Owner', (c) => c.owner],
  ['Tags', (c) => c.tags.join(', ')],
]

// A spreadsheet runs a cell that starts with = + - @ as a formula; text cells get a leading quote so
// that a customer's name cannot run one on the reader's machine. Numbers are left as they are.
const cell = (value: string | number | null) => {
  if (value === null) return ''
  if (typeof value === 'number') return String(value)
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}

export const toCsv = (rows: Customer[]) =>
  [COLUMNS.map(([title]) => title), ...rows.map((c) => COLUMNS.map(([, value]) => cell(value(c))))]
    .map((line) => line.join(','))
    .join('\r\n') + '\r\n'

const download = (rows: Customer[]) => {
  const url = URL.createObjectURL(new Blob([toCsv(rows)], { type: 'text/csv;charset=utf-8' }))
  const link = Object.assign(document.createElement('a'), { href: url, download: 'customers.csv' })
  link.click()
  setTimeout(() => URL.revokeObjectURL(url), 0)
}

export const Customers = ({ apiKey }: { apiKey: string }) => {
  const [filters, setFilters] = useState<Filter[]>([])
  const [rows, setRows] = useState<Customer[]>([])
  const [after, setAfter] = useState<number | undefined>()
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  // Only the latest request's answer is shown: new filters may be applied while a page is loading.
  const latest = useRef(0)

  const load = async (from: Customer[], cursor?: number) => {
    const request = ++latest.current
    setBusy(true)
    setError('')
    try {
      const page = await searchCustomers(apiKey, { filters, limit: PAGE, after: cursor })
      if (request !== latest.current) return
      setRows([...from, ...page.results])
      setAfter(page.paging?.next.after)
    } catch (err) {
      if (request === latest.current) setError((err as Error).message)
    } finally {
      if (request === latest.current) setBusy(false)
    }
  }
  useEffect(() => {
    load([])
  }, [filters])

  return html`<section aria-labelledby="customers-title">
    <h1 id="customers-title">Customers</h1>
    <${FilterBuilder} onApply=${setFilters} />
    ${error && html`<p role="alert" class="error">${error}</p>`}
    <div class="toolbar">
      <p aria-live="polite" id="customers-count" data-count=${rows.length}>
        ${busy ? 'Loading…' : `${rows.length} customers loaded${after === undefined ? '' : ', more to load'}`}
      </p>
      <button type="button" onClick=${() => download(rows)} disabled=${!rows.length}>Export CSV</button>
    </div>
    <div class="table-wrap">
      <table>
        <thead>
          <tr>${COLUMNS.map(([title]) => html`<th scope="col">${title}</th>`)}</tr>
        </thead>
        <tbody>
          ${rows.map(
            (c) => html`<tr key=${c.id}>
              <td><a href=${customerHref(c.id)}>${c.name}</a></td>
              <td>${c.id}</td>
              <td class="num">${score(c.engagementscore)}</td>
              <td class="num">${score(c.fitscore)}</td>
              <td class="num">${score(c.churn_risk)}</td>
              <td class="num">${score(c.upsell_score)}</td>
              <td>${c.last_seen ?? '–'}</td>
              <td>${c.owner ?? '–'}</td>
              <td>${c.tags.join(', ')}</td>
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
