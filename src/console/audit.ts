import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { type AuditEntry, type AuditPage, type Door, through } from './api.ts'
import { errorLine, When } from './format.ts'
import { value } from './load.ts'
import { Scroller } from './scroller.ts'

// The account's audit log (docs/console.md, "Audit log"), newest first, a page at a time. The API
// pages by `after` and filters nothing, so the filters here narrow the entries loaded so far, and
// say so; "Load older entries" reaches further back.

const PAGE = 100
type Status = 'all' | 'made' | 'refused'
interface Filters {
  actor: string
  action: string
  status: Status
  from: string
  to: string
}
const NONE: Filters = { actor: '', action: '', status: 'all', from: '', to: '' }

const actorOf = (e: AuditEntry) => `${e.actor.type}${e.actor.name ? `: ${e.actor.name}` : ''}`

// An entry the filters keep: the actor's words contain the text, the operation is the one chosen,
// the status is of the class chosen, and the day (UTC, as the service keeps it) is in the range.
const kept = (e: AuditEntry, f: Filters) => {
  const day = e.at.slice(0, 10)
  return (
    (!f.actor || actorOf(e).toLowerCase().includes(f.actor.trim().toLowerCase())) &&
    (!f.action || e.action === f.action) &&
    (f.status === 'all' || (f.status === 'made') === e.status < 400) &&
    (!f.from || day >= f.from) &&
    (!f.to || day <= f.to)
  )
}

export const AuditLog = ({ door }: { door: Door }) => {
  const [entries, setEntries] = useState<AuditEntry[]>([])
  const [next, setNext] = useState<number | undefined>()
  const [error, setError] = useState('')
  // Busy from the first paint: the first page is asked for by an effect, after it.
  const [busy, setBusy] = useState(true)
  const [filters, setFilters] = useState(NONE)
  const load = async (after: number | undefined, before: AuditEntry[]) => {
    setBusy(true)
    setError('')
    try {
      const query = `/audit?limit=${PAGE}${after === undefined ? '' : `&after=${after}`}`
      const page = await through<AuditPage>(door, 'GET', query)
      setEntries([...before, ...page.entries])
      setNext(page.paging?.next.after)
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  const doorKey = JSON.stringify(door)
  useEffect(() => {
    load(undefined, [])
  }, [doorKey])
  const actions = [...new Set(entries.map((e) => e.action))].sort()
  const shown = entries.filter((e) => kept(e, filters))
  const set = (key: keyof Filters) => (e: Event) => setFilters({ ...filters, [key]: value(e) })
  return html`<section aria-labelledby="audit-title">
    <h2 id="audit-title">Audit log</h2>
    <form class="actions audit-filters" aria-label="Audit log filters" onSubmit=${(e: Event) => e.preventDefault()}>
      <div class="field">
        <label for="audit-actor">Actor</label>
        <input id="audit-actor" value=${filters.actor} placeholder="email, key or operator" onInput=${set('actor')} />
      </div>
      <div class="field">
        <label for="audit-action">Operation</label>
        <select id="audit-action" value=${filters.action} onChange=${set('action')}>
          <option value="">any</option>
          ${actions.map((a) => html`<option value=${a}>${a}</option>`)}
        </select>
      </div>
      <div class="field">
        <label for="audit-status">Status</label>
        <select id="audit-status" value=${filters.status} onChange=${set('status')}>
          <option value="all">any</option>
          <option value="made">made (2xx)</option>
          <option value="refused">refused (4xx)</option>
        </select>
      </div>
      <div class="field">
        <label for="audit-from">From (UTC)</label>
        <input id="audit-from" type="date" value=${filters.from} onInput=${set('from')} />
      </div>
      <div class="field">
        <label for="audit-to">To (UTC)</label>
        <input id="audit-to" type="date" value=${filters.to} onInput=${set('to')} />
      </div>
      <button type="button" onClick=${() => setFilters(NONE)}>Clear filters</button>
    </form>
    <p id="audit-count" class="hint" aria-live="polite">
      ${shown.length} of the ${entries.length} entries loaded${next === undefined ? ' (all of them)' : ''}.
    </p>
    ${errorLine(error)}
    <${Scroller} label="Audit log"><table id="audit">
      <thead><tr>
        <th scope="col">When</th><th scope="col">Actor</th><th scope="col">Operation</th>
        <th scope="col">Target</th><th scope="col">Status</th><th scope="col">Address</th>
      </tr></thead>
      <tbody>
        ${shown.map(
          (e) => html`<tr key=${e.id} data-entry=${e.id} data-action=${e.action}>
            <td><${When} at=${e.at} /></td><td>${actorOf(e)}</td><td>${e.action}</td>
            <td class="target">${e.target}</td><td class="num">${e.status}</td><td>${e.address ?? '–'}</td>
          </tr>`,
        )}
      </tbody>
    </table></${Scroller}>
    ${
      next !== undefined &&
      html`<div class="actions">
        <button type="button" disabled=${busy} onClick=${() => load(next, entries)}>Load older entries</button>
      </div>`
    }
  </section>`
}
