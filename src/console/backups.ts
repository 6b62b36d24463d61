import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { listBackups, startBackup } from './api.ts'
import { errorLine, fileSize, When } from './format.ts'
import { useAction, useData } from './load.ts'
import { Scroller } from './scroller.ts'

// A backup of a large database takes minutes: the list is read again every POLL_MS until a newer
// file than the newest at the start is listed, for at most POLLS reads.
const POLL_MS = 2000
const POLLS = 150

// The operator's backups: the files in the backup folder, and a button that has a worker make one.
// The list is read again a few times after a start, as the worker writes the file in
// the background.
export const Backups = ({ token }: { token: string }) => {
  const list = useData(() => listBackups(token), [token])
  const action = useAction()
  const [started, setStarted] = useState('')
  // While waiting: the newest file when the backup was started, and the reads left.
  const [waiting, setWaiting] = useState<{ newest: string | undefined; polls: number } | null>(null)
  const newest = list.data?.backups[0]?.file
  useEffect(() => {
    if (!waiting) return
    if (newest !== waiting.newest || waiting.polls === 0) return setWaiting(null)
    const timer = setTimeout(
      () => list.reload().then(() => setWaiting({ ...waiting, polls: waiting.polls - 1 })),
      POLL_MS,
    )
    return () => clearTimeout(timer)
  }, [waiting, newest])
  const start = async () => {
    if (!(await action.run(() => startBackup(token)))) return
    setStarted('Backup started: it is listed here once a worker has written it.')
    setWaiting({ newest, polls: POLLS })
  }
  const problem = list.error || action.error
  return html`<section aria-labelledby="backups-title">
    <h2 id="backups-title">Backups</h2>
    ${errorLine(problem)}
    ${
      list.data &&
      html`<p>In <code>${list.data.folder}</code>; restore one with <code>service restore FILE</code>.</p>
        <${Scroller} label="Backups"><table id="backups">
          <thead><tr><th scope="col">File</th><th scope="col">Size</th><th scope="col">Created</th></tr></thead>
          <tbody>
            ${list.data.backups.map(
              (b) => html`<tr key=${b.file}>
                <td><code>${b.file}</code></td><td class="num">${fileSize(b.bytes)}</td>
                <td><${When} at=${b.created_at} /></td>
              </tr>`,
            )}
          </tbody>
        </table></${Scroller}>
        ${list.data.backups.length === 0 && html`<p>No backups yet.</p>`}`
    }
    <div class="actions">
      <button type="button" class="primary" disabled=${action.busy} onClick=${start}>Start a backup</button>
    </div>
    ${started && html`<p role="status">${started}</p>`}
  </section>`
}
