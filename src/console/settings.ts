import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import { type Account, admin, type Key, type NewKey, type Property } from './api.ts'
import { Backups } from './backups.ts'
import { ChurnModelSettings } from './churn.ts'
import { useAction, useData, value } from './load.ts'
import { ScoringModel } from './model.ts'
import { PeopleSettings } from './people.ts'
import { errorLine, When } from './format.ts'
import { Scroller } from './scroller.ts'

const SCOPES = ['search', 'upload', 'track', 'erase']

const Keys = ({ token, account }: { token: string; account: number }) => {
  const base = `/${account}/keys`
  const keys = useData(() => admin<Key[]>(token, 'GET', base), [token, account])
  const [name, setName] = useState('')
  const [scopes, setScopes] = useState(['search'])
  const [created, setCreated] = useState('')
  const action = useAction()
  const create = async (e: Event) => {
    e.preventDefault()
    const made = await action.run(() =>
      admin<NewKey>(token, 'POST', base, { scopes, ...(name ? { name } : {}) }),
    )
    if (made) {
      setCreated(made.token)
      setName('')
    }
    await keys.reload()
  }
  const revoke = async (id: number) => {
    await action.run(() => admin(token, 'DELETE', `${base}/${id}`))
    await keys.reload()
  }
  return html`<section aria-labelledby="keys-title">
    <h2 id="keys-title">API keys</h2>
    ${errorLine(keys.error || action.error)}
    ${
      keys.data &&
      html`<${Scroller} label="API keys"><table id="keys">
        <thead><tr>
          <th scope="col">ID</th><th scope="col">Name</th><th scope="col">Scopes</th>
          <th scope="col">Created</th><th scope="col">Revoked</th>
          <th scope="col"><span class="visually-hidden">Action</span></th>
        </tr></thead>
        <tbody>
          ${keys.data.map(
            (
              k,
            ) => html`<tr key=${k.id} data-key=${k.id} data-revoked=${k.revoked_at ? 'yes' : 'no'}>
              <td class="num">${k.id}</td><td>${k.name ?? '–'}</td><td>${k.scopes.join(', ')}</td>
              <td><${When} at=${k.created_at} /></td><td><${When} at=${k.revoked_at} /></td>
              <td>${
                !k.revoked_at &&
                html`<button type="button" aria-label=${`Revoke key ${k.id}`} onClick=${() => revoke(k.id)}>
                  Revoke
                </button>`
              }</td>
            </tr>`,
          )}
        </tbody>
      </table></${Scroller}>`
    }
    ${
      created &&
      html`<div role="status" class="once">
        <p>The new key, shown only this once:</p>
        <p><code id="new-key">${created}</code></p>
        <button type="button" onClick=${() => setCreated('')}>I have kept it</button>
      </div>`
    }
    <form class="actions" onSubmit=${create}>
      <div class="field">
        <label for="key-name">Key name (optional)</label>
        <input id="key-name" value=${name} onInput=${(e: Event) => setName(value(e))} />
      </div>
      <fieldset class="inline">
        <legend>Scopes</legend>
        ${SCOPES.map(
          (scope) => html`<label>
            <input type="checkbox" checked=${scopes.includes(scope)}
              onChange=${(e: Event) =>
                setScopes(
                  (e.currentTarget as HTMLInputElement).checked
                    ? [...scopes, scope]
                    : scopes.filter((s) => s !== scope),
                )} />
            ${scope}
          </label>`,
        )}
      </fieldset>
      <button type="submit" class="primary" disabled=${action.busy}>Create key</button>
    </form>
  </section>`
}

const Properties = ({
  token,
  account,
  properties,
  reload,
}: {
  token: string
  account: number
  properties: Property[]
  reload: () => Promise<void>
}) => {
  const [draft, setDraft] = useState({
    entity: 'customer',
    kind: 'attribute',
    codename: '',
    type: 'number',
    name: '',
  })
  const action = useAction()
  const define = async (e: Event) => {
    e.preventDefault()
    const { name, ...rest } = draft
    if (
      await action.run(() =>
        admin(token, 'POST', `/${account}/properties`, { ...rest, ...(name ? { name } : {}) }),
      )
    ) {
      setDraft({ ...draft, codename: '', name: '' })
      await reload()
    }
  }
  const select = (field: keyof typeof draft, label: string, options: string[]) =>
    html`<div class="field">
      <label for=${`property-${field}`}>${label}</label>
      <select id=${`property-${field}`} value=${draft[field]}
        onChange=${(e: Event) => setDraft({ ...draft, [field]: value(e) })}>
        ${options.map((o) => html`<option value=${o}>${o}</option>`)}
      </select>
    </div>`
  return html`<section aria-labelledby="properties-title">
    <h2 id="properties-title">Properties</h2>
    <${Scroller} label="Properties"><table id="properties">
      <thead><tr>
        <th scope="col">Entity</th><th scope="col">Kind</th><th scope="col">Codename</th><th scope="col">Type</th>
        <th scope="col">Name</th><th scope="col">Defined by</th>
      </tr></thead>
      <tbody>
        ${properties.map(
          (p) => html`<tr key=${`${p.entity}.${p.codename}`}>
            <td>${p.entity}</td><td>${p.kind}</td><td>${p.codename}</td><td>${p.type}</td><td>${p.name ?? '–'}</td>
            <td>${p.system ? 'the service' : 'the account'}</td>
          </tr>`,
        )}
      </tbody>
    </table></${Scroller}>
    <form class="actions" onSubmit=${define}>
      ${select('entity', 'Entity', ['customer', 'contact'])} ${select('kind', 'Kind', ['attribute', 'metric'])}
      <div class="field">
        <label for="property-codename">Codename</label>
        <input id="property-codename" required value=${draft.codename}
          onInput=${(e: Event) => setDraft({ ...draft, codename: value(e) })} />
      </div>
      ${select('type', 'Type', ['number', 'string', 'boolean', 'date'])}
      <div class="field">
        <label for="property-name">Display name (optional)</label>
        <input id="property-name" value=${draft.name} onInput=${(e: Event) => setDraft({ ...draft, name: value(e) })} />
      </div>
      <button type="submit" class="primary" disabled=${action.busy}>Define property</button>
    </form>
    ${errorLine(action.error)}
  </section>`
}

const Tracking = ({ token, account }: { token: string; account: number }) => {
  const read = useData(() => admin<Account>(token, 'GET', `/${account}`), [token, account])
  const [text, setText] = useState<string | null>(null)
  const [saved, setSaved] = useState('')
  const action = useAction()
  const domains = text ?? read.data?.tracking_domains.join('\n') ?? ''
  const save = async (e: Event) => {
    e.preventDefault()
    setSaved('')
    const list = domains.split(/\s+/).filter(Boolean)
    const answer = await action.run(() =>
      admin<Account>(token, 'PUT', `/${account}/tracking`, { domains: list }),
    )
    if (answer) {
      setText(answer.tracking_domains.join('\n'))
      setSaved(`Saved: ${answer.tracking_domains.length} domains.`)
    }
  }
  return html`<section aria-labelledby="tracking-title">
    <h2 id="tracking-title">Tracking</h2>
    ${errorLine(read.error || action.error)}
    ${read.data && html`<p>Tracker key <code>${read.data.tracker_key}</code></p>`}
    <form onSubmit=${save}>
      <div class="field">
        <label for="tracking-domains">Tracking domains, one a line</label>
        <textarea id="tracking-domains" rows="4" cols="40" value=${domains}
          onInput=${(e: Event) => setText(value(e))}></textarea>
      </div>
      <div class="actions"><button type="submit" class="primary" disabled=${action.busy}>Save domains</button></div>
    </form>
    ${saved && html`<p role="status">${saved}</p>`}
  </section>`
}

export const Settings = ({ token, account }: { token: string; account: number }) => {
  const properties = useData(
    () => admin<Property[]>(token, 'GET', `/${account}/properties`),
    [token, account],
  )
  return html`<section aria-labelledby="settings-title">
    <h1 id="settings-title">Settings of account ${account}</h1>
    <${Keys} token=${token} account=${account} />
    ${errorLine(properties.error)}
    ${
      properties.data &&
      html`<${Properties} token=${token} account=${account} properties=${properties.data}
          reload=${properties.reload} />
        <section aria-labelledby="model-title">
          <h2 id="model-title">Scoring model</h2>
          <${ScoringModel} token=${token} account=${account} properties=${properties.data} />
        </section>`
    }
    <${ChurnModelSettings} door=${{ kind: 'admin', token, account }} properties=${properties.data} />
    <${Tracking} token=${token} account=${account} />
    <${PeopleSettings} door=${{ kind: 'admin', token, account }} account=${account} />
    <${Backups} token=${token} />
  </section>`
}
