import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import { type Account, admin } from './api.ts'
import { useAction, useData, value } from './load.ts'
import { Empty, Failed, Loading, When } from './format.ts'
import { Scroller } from './scroller.ts'

// The admin token spans every account: the operator picks the one the other views work on.
export const Accounts = ({
  token,
  chosen,
  onChoose,
}: {
  token: string
  chosen: number | null
  onChoose: (id: number) => void
}) => {
  const accounts = useData(() => admin<Account[]>(token, 'GET', ''), [token])
  const [name, setName] = useState('')
  const action = useAction()
  const create = async (e: Event) => {
    e.preventDefault()
    const made = await action.run(() => admin<Account>(token, 'POST', '', { name }))
    if (!made) return
    setName('')
    await accounts.reload()
    onChoose(made.id)
  }
  return html`<section aria-labelledby="accounts-title">
    <h1 id="accounts-title">Accounts</h1>
    ${accounts.error && html`<${Failed} error=${accounts.error} />`}
    ${!accounts.data && !accounts.error && html`<${Loading} what="accounts" />`}
    ${accounts.data?.length === 0 && html`<${Empty}>No accounts yet: create the first below.</${Empty}>`}
    ${
      accounts.data?.length &&
      html`<${Scroller} label="Accounts"><table id="accounts">
        <thead><tr>
          <th scope="col">ID</th><th scope="col">Name</th><th scope="col">Source of truth</th>
          <th scope="col">Created</th><th scope="col"><span class="visually-hidden">Action</span></th>
        </tr></thead>
        <tbody>
          ${accounts.data.map(
            (a) => html`<tr key=${a.id} aria-current=${a.id === chosen ? 'true' : undefined}>
              <td class="num">${a.id}</td><td>${a.name}</td><td>${a.source_of_truth}</td>
              <td><${When} at=${a.created_at} /></td>
              <td>${
                a.id === chosen
                  ? html`<strong>Chosen</strong>`
                  : html`<button type="button" aria-label=${`Choose ${a.name} (${a.id})`}
                      onClick=${() => onChoose(a.id)}>Choose</button>`
              }</td>
            </tr>`,
          )}
        </tbody>
      </table></${Scroller}>`
    }
    <h2>New account</h2>
    <form class="actions" onSubmit=${create}>
      <div class="field">
        <label for="account-name">Name</label>
        <input id="account-name" required value=${name} onInput=${(e: Event) => setName(value(e))} />
      </div>
      <button type="submit" class="primary" disabled=${action.busy}>Create account</button>
    </form>
    ${action.error && html`<${Failed} error=${action.error} />`}
  </section>`
}
