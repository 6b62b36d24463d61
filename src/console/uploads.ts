import { html } from 'htm/preact'
import { useEffect, useRef } from 'preact/hooks'
import { admin, listUploads, type Session, type Upload } from './api.ts'
import { useData } from './load.ts'
import { Empty, Failed, When } from './format.ts'
import { Scroller } from './scroller.ts'

const POLL_MS = 1000
const busy = (u: Upload) => u.status === 'received' || u.status === 'processing'
const count = (n: number | null) => (n === null ? '–' : String(n))
// Refreshes while any upload shown is still waiting or being processed, and stops once
// all are done.
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
  html`<${Scroller} label="Uploads"><table id="uploads">
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
          <td class="num">${count(u.ignored)}</td><td class="wrap">${
            u.dropped_key_names?.length
              ? html`<details><summary>${count(u.dropped_keys)}</summary><ul class="dropped">
                  ${u.dropped_key_names.map(
                    (d) =>
                      html`<li><code>${d.key}</code> ×${d.count}${
                        d.did_you_mean && html` (did you mean <code>${d.did_you_mean}</code>?)`
                      }</li>`,
                  )}
                </ul></details>`
              : count(u.dropped_keys)
          }</td>
          <td class="wrap">${
            u.warnings?.length
              ? html`<details><summary>${u.warnings.length}</summary><ul>
                  ${u.warnings.map((w) => html`<li>${w.external_id}: ${w.message}</li>`)}
                </ul></details>`
              : '0'
          }</td>
          <td class="wrap">${u.error ?? ''}</td><td><${When} at=${u.received_at} /></td>
        </tr>`,
      )}
    </tbody>
  </table></${Scroller}>`

// The newest uploads first, refreshed while any is still waiting or being processed.
const Listed = ({ list }: { list: ReturnType<typeof useData<Upload[]>> }) => {
  usePolling(list.data, list.reload)
  return html`${list.error && html`<${Failed} error=${list.error} />`}
    <div class="actions"><button type="button" onClick=${list.reload}>Refresh uploads</button></div>
    <p aria-live="polite" id="uploads-state">
      ${!list.data ? 'Loading…' : `${list.data.length} uploads${list.data.some(busy) ? ', refreshing' : ''}`}
    </p>
    ${list.data?.length === 0 && html`<${Empty}>No uploads yet.</${Empty}>`}
    ${list.data?.length && html`<${Table} uploads=${list.data} />`}`
}

// The admin API lists the chosen account's uploads.
const AccountUploads = ({ token, account }: { token: string; account: number }) => {
  const list = useData(() => admin<Upload[]>(token, 'GET', `/${account}/uploads`), [token, account])
  return html`<${Listed} list=${list} />`
}

// A service key lists its own account's uploads through the public API.
const KeyUploads = ({ apiKey }: { apiKey: string }) => {
  const list = useData(() => listUploads(apiKey), [apiKey])
  return html`<${Listed} list=${list} />`
}

export const Uploads = ({ session, account }: { session: Session; account: number | null }) =>
  html`<section aria-labelledby="uploads-title">
    <h1 id="uploads-title">Uploads</h1>
    ${
      session.kind === 'admin'
        ? html`<${AccountUploads} token=${session.secret} account=${account} />`
        : html`<${KeyUploads} apiKey=${session.secret} />`
    }
  </section>`
