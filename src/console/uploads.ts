import { html } from 'htm/preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { admin, getUpload, type Session, type Upload } from './api.ts'
import { useData, value } from './load.ts'

const POLL_MS = 1000
const busy = (u: Upload) => u.status === 'received' || u.status === 'processing'
const count = (n: number | null) => (n === null ? '–' : String(n))

// Refreshes while any upload shown is still waiting or being processed, and stops once all are done.
const usePolling = (uploads: Upload[] | undefined, reload: () => unknown) => {
  const waiting = uploads?.some(busy) ?? false
  const latest = useRef(reload)
  latest.current = reload
  useEffect(() => {
    if (!waiting) return
    const timer = setInterval(() => latest.current(), POLL_MS)
    return () => clearInterval(timer)
  }, [waiting])
}

const Table = ({ uploads }: { uploads: Upload[] }) =>
  html`<div class="table-wrap"><table id="uploads">
    <thead><tr>
      <th scope="col">ID</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Items</th>
      <th scope="col">Created</th><th scope="col">Updated</th><th scope="col">Ignored</th>
      <th scope="col">Dropped keys</th><th scope="col">Warnings</th><th scope="col">Error</th>
      <th scope="col">Received</th>
    </tr></thead>
    <tbody>
      ${uploads.map(
        (u) => html`<tr key=${u.upload_id} data-upload=${u.upload_id} data-status=${u.status}>
          <td class="num">${u.upload_id}</td><td>${u.kind}</td>
          <td>${u.status}${u.stuck ? ' (stuck)' : ''}</td><td class="num">${u.items}</td>
          <td class="num">${count(u.created)}</td><td class="num">${count(u.updated)}</td>
          <td class="num">${count(u.ignored)}</td><td class="num">${count(u.dropped_keys)}</td>
          <td class="wrap">${
            u.warnings?.length
              ? html`<details><summary>${u.warnings.length}</summary><ul>
                  ${u.warnings.map((w) => html`<li>${w.external_id}: ${w.message}</li>`)}
                </ul></details>`
              : '0'
          }</td>
          <td class="wrap">${u.error ?? ''}</td><td>${u.received_at}</td>
        </tr>`,
      )}
    </tbody>
  </table></div>`

// The admin API lists an account's uploads, newest first.
const AccountUploads = ({ token, account }: { token: string; account: number }) => {
  const list = useData(() => admin<Upload[]>(token, 'GET', `/${account}/uploads`), [token, account])
  usePolling(list.data, list.reload)
  return html`${list.error && html`<p role="alert" class="error">${list.error}</p>`}
    <div class="actions"><button type="button" onClick=${list.reload}>Refresh uploads</button></div>
    <p aria-live="polite" id="uploads-state">
      ${!list.data ? 'Loading…' : `${list.data.length} uploads${list.data.some(busy) ? ', refreshing' : ''}`}
    </p>
    ${list.data && html`<${Table} uploads=${list.data} />`}`
}

// A service key has no list of uploads (the public API reads one by id): the uploads asked for are
// shown, and followed until processed.
const UploadsById = ({ apiKey }: { apiKey: string }) => {
  const [ids, setIds] = useState<number[]>([])
  const [wanted, setWanted] = useState('')
  const list = useData(() => Promise.all(ids.map((id) => getUpload(apiKey, id))), [apiKey, ids])
  usePolling(list.data, list.reload)
  const add = (e: Event) => {
    e.preventDefault()
    const id = Number(wanted)
    if (Number.isInteger(id) && id > 0 && !ids.includes(id)) setIds([id, ...ids])
    setWanted('')
  }
  return html`<form class="actions" onSubmit=${add}>
      <div class="field">
        <label for="upload-id">Upload ID</label>
        <input id="upload-id" inputmode="numeric" pattern="[0-9]+" required value=${wanted}
          aria-describedby="upload-id-hint" onInput=${(e: Event) => setWanted(value(e))} />
      </div>
      <button type="submit" class="primary">Show</button>
    </form>
    <p id="upload-id-hint" class="hint">The upload_id an upload answered with. Only the admin token lists them all.</p>
    ${list.error && html`<p role="alert" class="error">${list.error}</p>`}
    ${list.data && list.data.length > 0 && html`<${Table} uploads=${list.data} />`}`
}

export const Uploads = ({ session, account }: { session: Session; account: number | null }) =>
  html`<section aria-labelledby="uploads-title">
    <h1 id="uploads-title">Uploads</h1>
    ${
      session.kind === 'key'
        ? html`<${UploadsById} apiKey=${session.secret} />`
        : html`<${AccountUploads} token=${session.secret} account=${account} />`
    }
  </section>`
