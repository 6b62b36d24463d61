import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { Accounts } from './accounts.ts'
import { value } from './load.ts'
import {
  admin,
  ApiError,
  forgetSession,
  searchCustomers,
  type Session,
  storeAccount,
  storedAccount,
  storedSession,
  storeSession,
} from './api.ts'
import { CustomerPage } from './customer.ts'
import { Customers } from './customers.ts'
import { Matrix } from './matrix.ts'
import { Settings } from './settings.ts'
import { Uploads } from './uploads.ts'
import { Webhooks } from './webhooks.ts'

// Views live in the URL's fragment, so the service serves one page and a view can be bookmarked.
type Name = 'matrix' | 'customers' | 'customer' | 'accounts' | 'uploads' | 'webhooks' | 'settings'
type View = { name: Exclude<Name, 'customer'> } | { name: 'customer'; id: string }
const TITLES: Record<Name, string> = {
  matrix: 'Score matrix',
  customers: 'Customers',
  customer: 'Customer',
  accounts: 'Accounts',
  uploads: 'Uploads',
  webhooks: 'Webhooks',
  settings: 'Settings',
}
// A service key sees its account's customers; the admin token the accounts and their settings.
const NAV: Record<Session['kind'], Exclude<Name, 'customer'>[]> = {
  key: ['matrix', 'customers', 'uploads'],
  admin: ['accounts', 'uploads', 'webhooks', 'settings'],
}
const viewOf = (hash: string, kind: Session['kind']): View => {
  const customer = /^#\/customer\/(.+)$/.exec(hash)
  if (customer && kind === 'key') return { name: 'customer', id: decodeURIComponent(customer[1]) }
  const name = hash.slice(2) as Exclude<Name, 'customer'>
  return { name: NAV[kind].includes(name) ? name : NAV[kind][0] }
}

const failure = (err: unknown, what: string) => {
  const refused = err instanceof ApiError && (err.status === 401 || err.status === 403)
  return refused ? `The ${what} was refused: ${(err as Error).message}` : (err as Error).message
}

// One credential field with its check: a service key is proved by a search of one customer (every
// customer view searches), the admin token by the list of accounts.
const Credential = ({ kind, onSignIn }: { kind: Session['kind']; onSignIn: (session: Session) => void }) => {
  const [secret, setSecret] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const [id, label, what] =
    kind === 'key' ? ['service-key', 'Service key', 'key'] : ['admin-token', 'Admin token', 'admin token']
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    try {
      const given = secret.trim()
      await (kind === 'key' ? searchCustomers(given, { limit: 1 }) : admin(given, 'GET', ''))
      storeSession({ kind, secret: given })
      onSignIn({ kind, secret: given })
    } catch (err) {
      setError(failure(err, what))
    } finally {
      setBusy(false)
    }
  }
  return html`<form onSubmit=${submit}>
    <label for=${id}>${label}</label>
    <input id=${id} type="password" autocomplete="off" spellcheck="false" required value=${secret}
      aria-describedby=${`${id}-hint`} onInput=${(e: Event) => setSecret(value(e))} />
    <p id=${`${id}-hint`} class="hint">
      ${
        kind === 'key'
          ? "An account's key with the search scope (sk_…): that account's customers and uploads."
          : "The service's SERVICE_ADMIN_TOKEN: every account, its uploads, webhooks and settings."
      }
      It is kept in this tab's session storage only and sent to this service alone.
    </p>
    ${error && html`<p role="alert" class="error">${error}</p>`}
    <button type="submit" class="primary" disabled=${busy}>
      ${kind === 'key' ? 'Sign in' : 'Enter as operator'}
    </button>
  </form>`
}

const SignIn = ({ onSignIn }: { onSignIn: (session: Session) => void }) =>
  html`<main class="signin">
    <h1>Sign in to the console</h1>
    <${Credential} kind="key" onSignIn=${onSignIn} />
    <h2>Or as the operator</h2>
    <${Credential} kind="admin" onSignIn=${onSignIn} />
  </main>`

export const App = () => {
  const [session, setSession] = useState(storedSession())
  const [account, setAccount] = useState(storedAccount())
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const follow = () => setHash(location.hash)
    addEventListener('hashchange', follow)
    return () => removeEventListener('hashchange', follow)
  }, [])
  const view = viewOf(hash, session?.kind ?? 'key')
  useEffect(() => {
    document.title = `${session ? TITLES[view.name] : 'Sign in'} · Console`
  }, [session, view.name])

  if (!session) return html`<${SignIn} onSignIn=${setSession} />`
  const signOut = () => {
    forgetSession()
    setSession(null)
    setAccount(null)
  }
  const choose = (id: number) => {
    storeAccount(id)
    setAccount(id)
  }
  const link = (name: Exclude<Name, 'customer'>) =>
    html`<a href=${`#/${name}`} aria-current=${view.name === name ? 'page' : undefined}>${TITLES[name]}</a>`
  // The admin's views other than the list work on the chosen account.
  const needsAccount = session.kind === 'admin' && view.name !== 'accounts' && account === null
  const body = () => {
    if (needsAccount) return html`<p>Choose an account first, in <a href="#/accounts">Accounts</a>.</p>`
    if (session.kind === 'admin') {
      const token = session.secret
      if (view.name === 'webhooks') return html`<${Webhooks} token=${token} account=${account} />`
      if (view.name === 'settings') return html`<${Settings} token=${token} account=${account} />`
      if (view.name === 'uploads') return html`<${Uploads} session=${session} account=${account} />`
      return html`<${Accounts} token=${token} chosen=${account} onChoose=${choose} />`
    }
    const key = session.secret
    if (view.name === 'customer') return html`<${CustomerPage} apiKey=${key} id=${view.id} />`
    if (view.name === 'customers') return html`<${Customers} apiKey=${key} />`
    if (view.name === 'uploads') return html`<${Uploads} session=${session} account=${null} />`
    return html`<${Matrix} apiKey=${key} />`
  }
  return html`<header>
      <span class="brand">Console</span>
      <nav aria-label="Views">${NAV[session.kind].map((name) => html`${link(name)} `)}</nav>
      ${
        session.kind === 'admin' &&
        html`<span id="chosen-account">${account ? `Account ${account}` : 'No account chosen'}</span>`
      }
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main>${body()}</main>`
}
