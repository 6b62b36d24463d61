import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import { admin, type Delivery, eventTypes, type NewWebhook, type Webhook } from './api.ts'
import { useAction, useData, value } from './load.ts'
import { Empty, Failed, Loading, When } from './format.ts'
import { Scroller } from './scroller.ts'

// A delivery's attempts, newest last: when, the receiver's status (or why none came), how long, and
// the start of its answer.
const Attempts = ({ delivery }: { delivery: Delivery }) =>
  delivery.attempts.length === 0
    ? html`<span class="muted">none yet</span>`
    : html`<ol class="attempts">
        ${delivery.attempts.map(
          (a) => html`<li>
            <${When} at=${a.at} />: ${a.status_code ?? 'no answer'} in ${a.duration_ms} ms
            ${a.error ? ` · ${a.error}` : ''}
            ${a.response_excerpt && html`<q class="excerpt">${a.response_excerpt}</q>`}
          </li>`,
        )}
      </ol>`

// Whether deliveries arrive: a webhook whose every delivery fails reads as failing (since
// when, and its last error), and one the service disabled after failing too long says so,
// not merely "disabled".
const Health = ({ webhook: w }: { webhook: Webhook }) => {
  const last = w.last_failure
  const why = last && `${last.status_code ?? 'no answer'}${last.error ? `: ${last.error}` : ''}`
  const state = !w.active
    ? w.disabled_by === 'service'
      ? html`<span class="badge badge-poor">▲ disabled by the service</span>`
      : html`<span class="badge badge-none">○ disabled</span>`
    : w.failing_since
      ? html`<span class="badge badge-fair">◆ failing</span>`
      : html`<span class="badge badge-good">● enabled</span>`
  return html`${state}${
    w.failing_since &&
    html`<br /><span class="muted">failing since <${When} at=${w.failing_since} /></span>`
  }${last && html`<br /><span class="muted">last error <${When} at=${last.at} />: ${why}</span>`}`
}

const Deliveries = ({
  token,
  base,
  webhook,
}: {
  token: string
  base: string
  webhook: Webhook
}) => {
  const list = useData(
    () => admin<Delivery[]>(token, 'GET', `${base}/${webhook.id}/deliveries?limit=50`),
    [webhook.id],
  )
  const action = useAction()
  const redeliver = async (d: Delivery) => {
    if (
      await action.run(() =>
        admin(token, 'POST', `${base}/${webhook.id}/deliveries/${d.id}/redeliver`),
      )
    ) {
      await list.reload()
    }
  }
  return html`<section aria-labelledby="deliveries-title" id="deliveries">
    <h2 id="deliveries-title">Deliveries to ${webhook.name ?? webhook.url}</h2>
    <div class="actions">
      <button type="button" onClick=${list.reload}>Refresh deliveries</button>
    </div>
    ${(list.error || action.error) && html`<${Failed} error=${list.error || action.error} />`}
    ${!list.data && !list.error && html`<${Loading} what="deliveries" />`}
    ${list.data?.length === 0 && html`<${Empty}>No deliveries yet.</${Empty}>`}
    ${
      list.data?.length &&
      html`<${Scroller} label="Deliveries"><table>
        <thead><tr>
          <th scope="col">ID</th><th scope="col">webhook-id</th><th scope="col">Status</th>
          <th scope="col">Created</th><th scope="col">Attempts</th>
          <th scope="col"><span class="visually-hidden">Action</span></th>
        </tr></thead>
        <tbody>
          ${list.data.map(
            (d) => html`<tr key=${d.id} data-delivery=${d.id} data-status=${d.status}
                data-attempts=${d.attempts.length}>
              <td class="num">${d.id}</td><td>${d.message_id}</td><td>${d.status}</td>
              <td><${When} at=${d.created_at} /></td>
              <td class="wrap"><${Attempts} delivery=${d} /></td>
              <td><button type="button" disabled=${action.busy} aria-label=${`Redeliver ${d.id}`}
                onClick=${() => redeliver(d)}>Redeliver</button></td>
            </tr>`,
          )}
        </tbody>
      </table></${Scroller}>`
    }
  </section>`
}

// An account's webhook subscriptions, each a card (name, URL, events, health, actions) that wraps
// to any width: add one (its secret is shown this once), remove one, disable one (its deliveries
// are held) or enable one again, and a delivery log with redelivery.
export const Webhooks = ({ token, account }: { token: string; account: number }) => {
  const base = `/${account}/webhooks`
  const list = useData(() => admin<Webhook[]>(token, 'GET', base), [token, account])
  const [url, setUrl] = useState('')
  const [name, setName] = useState('')
  const events = useData(() => eventTypes(token), [token])
  const [chosen, setChosen] = useState(['customer.created'])
  const [secret, setSecret] = useState('')
  const [shown, setShown] = useState<number | null>(null)
  const action = useAction()
  const add = async (e: Event) => {
    e.preventDefault()
    const body = { url, events: chosen, ...(name ? { name } : {}) }
    const made = await action.run(() => admin<NewWebhook>(token, 'POST', base, body))
    if (!made) return
    setSecret(made.secret)
    setUrl('')
    setName('')
    await list.reload()
  }
  const act = async (method: string, path: string) => {
    await action.run(() => admin(token, method, path))
    await list.reload()
  }
  const remove = async (w: Webhook) => {
    await act('DELETE', `${base}/${w.id}`)
    if (shown === w.id) setShown(null)
  }
  const shownHook = list.data?.find((w) => w.id === shown)
  return html`<section aria-labelledby="webhooks-title">
    <h1 id="webhooks-title">Webhooks</h1>
    ${(list.error || action.error) && html`<${Failed} error=${list.error || action.error} />`}
    ${!list.data && !list.error && html`<${Loading} what="webhooks" />`}
    ${list.data?.length === 0 && html`<${Empty}>No subscriptions yet.</${Empty}>`}
    ${
      list.data?.length &&
      html`<h2>Subscriptions</h2>
      <ul class="webhook-list" id="webhooks">
        ${list.data.map(
          (w) => html`<li key=${w.id} class="webhook" data-webhook=${w.id}>
            <h3>${w.name ?? 'Unnamed'} <span class="muted">webhook ${w.id}</span></h3>
            <dl>
              <div><dt>URL</dt><dd class="url">${w.url}</dd></div>
              <div><dt>Events</dt><dd>${w.events.join(', ')}</dd></div>
              <div><dt>State</dt><dd class="state-of"><${Health} webhook=${w} /></dd></div>
            </dl>
            <div class="row-actions">
              <button type="button" aria-label=${`Deliveries of webhook ${w.id}`}
                onClick=${() => setShown(w.id)}>Deliveries</button>
              ${
                w.active
                  ? html`<button type="button" aria-label=${`Disable webhook ${w.id}`}
                      onClick=${() => act('POST', `${base}/${w.id}/disable`)}>Disable</button>`
                  : html`<button type="button" aria-label=${`Enable webhook ${w.id}`}
                      onClick=${() => act('POST', `${base}/${w.id}/enable`)}>Enable</button>`
              }
              <button type="button" aria-label=${`Remove webhook ${w.id}`} onClick=${() => remove(w)}>Remove</button>
            </div>
          </li>`,
        )}
      </ul>`
    }
    ${
      secret &&
      html`<div role="status" class="once">
        <p>The new webhook's signing secret, shown only this once:</p>
        <p><code id="webhook-secret">${secret}</code></p>
        <button type="button" onClick=${() => setSecret('')}>I have kept it</button>
      </div>`
    }
    <h2>New subscription</h2>
    <form class="actions" onSubmit=${add}>
      <div class="field">
        <label for="webhook-url">Receiver URL</label>
        <input id="webhook-url" type="url" required size="40" value=${url} onInput=${(e: Event) => setUrl(value(e))} />
      </div>
      <div class="field">
        <label for="webhook-name">Name (optional)</label>
        <input id="webhook-name" value=${name} onInput=${(e: Event) => setName(value(e))} />
      </div>
      <fieldset class="inline">
        <legend>Events</legend>
        ${(events.data ?? []).map(
          (e) => html`<label title=${e.description}>
            <input type="checkbox" checked=${chosen.includes(e.name)}
              onChange=${(ev: Event) =>
                setChosen(
                  (ev.currentTarget as HTMLInputElement).checked
                    ? [...chosen, e.name]
                    : chosen.filter((c) => c !== e.name),
                )} />
            ${e.name}
          </label>`,
        )}
      </fieldset>
      <button type="submit" class="primary" disabled=${action.busy}>Subscribe</button>
    </form>
    ${shownHook && html`<${Deliveries} key=${shownHook.id} token=${token} base=${base} webhook=${shownHook} />`}
  </section>`
}
