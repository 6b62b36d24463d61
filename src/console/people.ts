import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import {
  type Door,
  type Invite,
  ROLES,
  type ResetLink,
  type SsoBody,
  type SsoConfig,
  through,
  type User,
} from './api.ts'
import { ChurnModelSettings } from './churn.ts'
import { AuditLog } from './audit.ts'
import { errorLine } from './format.ts'
import { useAction, useData, value } from './load.ts'
import { Scroller } from './scroller.ts'

// Settings' people (docs/console.md, "Users, invites and SSO"): the account's users with their
// roles, invites and reset links (each shown once, to be given to the person: the service sends
// no mail), and single sign-on. The operator reaches them through the admin API, an account admin
// through a session; both change the role of any user but themselves (the service keeps one admin).

// A one-time link, shown until the person who made it has kept it.
const Once = ({
  id,
  what,
  url,
  onDone,
}: {
  id: string
  what: string
  url: string
  onDone: () => void
}) =>
  html`<div role="status" class="once">
    <p>${what}, shown only this once: give it to the person.</p>
    <p><code id=${id} class="link">${url}</code></p>
    <button type="button" onClick=${onDone}>I have kept it</button>
  </div>`

const InviteForm = ({ door, onInvited }: { door: Door; onInvited: () => Promise<void> }) => {
  const [draft, setDraft] = useState({ email: '', name: '', role: 'viewer' })
  const [link, setLink] = useState('')
  const action = useAction()
  const invite = async (e: Event) => {
    e.preventDefault()
    const { name, ...rest } = draft
    const made = await action.run(() =>
      through<Invite>(door, 'POST', '/users', { ...rest, ...(name ? { name } : {}) }),
    )
    if (!made) return
    setLink(made.invite_url)
    setDraft({ email: '', name: '', role: draft.role })
    await onInvited()
  }
  const field = (key: 'email' | 'name', label: string, type: string) =>
    html`<div class="field">
      <label for=${`invite-${key}`}>${label}</label>
      <input id=${`invite-${key}`} type=${type} required=${key === 'email'} value=${draft[key]}
        onInput=${(e: Event) => setDraft({ ...draft, [key]: value(e) })} />
    </div>`
  return html`<form class="actions" aria-label="Invite a user" onSubmit=${invite}>
      ${field('email', 'Email', 'email')} ${field('name', 'Name (optional)', 'text')}
      <div class="field">
        <label for="invite-role">Role</label>
        <select id="invite-role" value=${draft.role} onChange=${(e: Event) => setDraft({ ...draft, role: value(e) })}>
          ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
        </select>
      </div>
      <button type="submit" class="primary" disabled=${action.busy}>Invite</button>
    </form>
    ${errorLine(action.error)}
    ${
      link &&
      html`<${Once} id="invite-link" what="The invite link (valid 7 days)" url=${link}
        onDone=${() => setLink('')} />`
    }`
}

const Users = ({ door, self }: { door: Door; self?: number }) => {
  const users = useData(() => through<User[]>(door, 'GET', '/users'), [JSON.stringify(door)])
  const [reset, setReset] = useState('')
  const action = useAction()
  const resetOf = async (u: User) => {
    const made = await action.run(() => through<ResetLink>(door, 'POST', `/users/${u.id}/reset`))
    if (made) setReset(made.reset_url)
  }
  const setRole = async (u: User, role: string) => {
    await action.run(() => through(door, 'PATCH', `/users/${u.id}`, { role }))
    await users.reload()
  }
  const remove = async (u: User) => {
    if (!confirm(`Remove ${u.email}? Their sessions end at once.`)) return
    await action.run(() => through(door, 'DELETE', `/users/${u.id}`))
    await users.reload()
  }
  return html`<section aria-labelledby="users-title">
    <h2 id="users-title">Users</h2>
    <p class="hint">
      Everyone invited is listed, whether or not they have set their password yet; removing one who has
      not ends their invite.
    </p>
    ${errorLine(users.error || action.error)}
    ${
      users.data &&
      html`<${Scroller} label="Users"><table id="users">
        <thead><tr>
          <th scope="col">Name</th><th scope="col">Email</th><th scope="col">Role</th>
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        </tr></thead>
        <tbody>
          ${users.data.map(
            (u) => html`<tr key=${u.id} data-user=${u.id}>
              <td>${u.name ?? '–'}</td><td>${u.email}</td>
              <td data-role=${u.role}>${
                u.id === self
                  ? u.role
                  : html`<select aria-label=${`Role of ${u.email}`} value=${u.role} disabled=${action.busy}
                      onChange=${(e: Event) => setRole(u, value(e))}>
                      ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
                    </select>`
              }</td>
              <td class="row-actions">
                <button type="button" aria-label=${`Reset link for ${u.email}`} onClick=${() => resetOf(u)}>
                  Reset link
                </button>${' '}
                ${
                  u.id !== self &&
                  html`<button type="button" aria-label=${`Remove ${u.email}`} onClick=${() => remove(u)}>
                    Remove
                  </button>`
                }
              </td>
            </tr>`,
          )}
        </tbody>
      </table></${Scroller}>`
    }
    ${
      reset &&
      html`<${Once} id="reset-link" what="The password reset link (valid 1 day)" url=${reset}
        onDone=${() => setReset('')} />`
    }
    <h3>Invite a user</h3>
    <${InviteForm} door=${door} onInvited=${users.reload} />
  </section>`
}

// The link that offers the account's SSO on the sign-in page (the API tells no one beforehand
// whether an account has SSO).
const ssoLink = (account: number) => `${location.origin}${location.pathname}#sso=${account}`

// The operator (PUT /admin/v1/accounts/{id}/sso) or an account admin (PUT /api/v1/sso) sets the
// account's provider. The service keeps the client secret: it shows the rest, never the secret.
const SsoForm = ({ door }: { door: Door }) => {
  const [draft, setDraft] = useState({
    issuer: '',
    client_id: '',
    client_secret: '',
    domains: '',
    default_role: 'viewer',
  })
  const [saved, setSaved] = useState<SsoConfig | undefined>()
  // Only an account admin can read the configuration back (GET /api/v1/sso; 404 when
  // there is none).
  const current = useData(
    () =>
      door.kind === 'user'
        ? through<SsoConfig>(door, 'GET', '/sso').catch(() => undefined)
        : Promise.resolve(undefined),
    [JSON.stringify(door)],
  )
  const shown = saved ?? current.data
  const action = useAction()
  const save = async (e: Event) => {
    e.preventDefault()
    const body = { ...draft, domains: draft.domains.split(/[\s,]+/).filter(Boolean) } as SsoBody
    const answer = await action.run(() => through<SsoConfig>(door, 'PUT', '/sso', body))
    if (answer) {
      setSaved(answer)
      setDraft({ ...draft, client_secret: '' })
    }
  }
  const field = (key: 'issuer' | 'client_id' | 'client_secret', label: string, type = 'text') =>
    html`<div class="field">
      <label for=${`sso-${key}`}>${label}</label>
      <input id=${`sso-${key}`} type=${type} required autocomplete="off" value=${draft[key]}
        onInput=${(e: Event) => setDraft({ ...draft, [key]: value(e) })} />
    </div>`
  return html`<form onSubmit=${save} aria-label="Single sign-on">
      <div class="actions">
        ${field('issuer', 'Issuer URL')} ${field('client_id', 'Client ID')}
        ${field('client_secret', 'Client secret', 'password')}
      </div>
      <div class="actions">
        <div class="field">
          <label for="sso-domains">Email domains, one a line</label>
          <textarea id="sso-domains" rows="3" cols="30" required value=${draft.domains}
            onInput=${(e: Event) => setDraft({ ...draft, domains: value(e) })}></textarea>
        </div>
        <div class="field">
          <label for="sso-role">Role of a new user</label>
          <select id="sso-role" value=${draft.default_role}
            onChange=${(e: Event) => setDraft({ ...draft, default_role: value(e) })}>
            ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
          </select>
        </div>
        <button type="submit" class="primary" disabled=${action.busy}>Save single sign-on</button>
      </div>
    </form>
    ${errorLine(action.error)}
    ${
      shown &&
      html`<p role="status" id="sso-saved">
        ${saved ? 'Saved' : 'Set'}: ${shown.issuer}, client ${shown.client_id}, for ${shown.domains.join(', ')}
        (new users: ${shown.default_role}).
      </p>`
    }`
}

const Sso = ({ door, account }: { door: Door; account: number }) =>
  html`<section aria-labelledby="sso-title">
    <h2 id="sso-title">Single sign-on</h2>
    <${SsoForm} door=${door} />
    <p>People sign in with SSO from <code class="link">${ssoLink(account)}</code></p>
  </section>`

// The hooks into Settings: the operator's (settings.ts) and an account admin's page (app.ts).
export const PeopleSettings = ({
  door,
  account,
  self,
}: {
  door: Door
  account: number
  self?: number
}) =>
  html`<${Users} door=${door} self=${self} />
    <${Sso} door=${door} account=${account} />
    <${AuditLog} door=${door} />`

export const PersonSettings = ({
  credential,
  account,
  self,
}: {
  credential: string
  account: number
  self: number
}) =>
  html`<section aria-labelledby="settings-title">
    <h1 id="settings-title">Settings of account ${account}</h1>
    <${PeopleSettings} door=${{ kind: 'user', credential }} account=${account} self=${self} />
    <${ChurnModelSettings} door=${{ kind: 'user', credential }} />
  </section>`
