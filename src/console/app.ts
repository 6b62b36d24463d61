import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { Accounts } from './accounts.ts'
import { useData, value } from './load.ts'
import { focusOn } from './format.ts'
import {
  type Account,
  admin,
  ApiError,
  forgetSession,
  type Condition,
  keyAccount,
  searchCustomers,
  type Session,
  type SortKey,
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
import { WeekView } from './week.ts'

// Views live in the URL's fragment, so the service serves one page and a view can be bookmarked.
type Name = 'week' | 'matrix' | 'customers' | 'customer' | 'accounts' | 'uploads' | 'webhooks' | 'settings'
type Listed = Exclude<Name, 'customer'>
type View =
  | { name: Exclude<Listed, 'customers' | 'week'> }
  | { name: 'week'; days: 7 | 30 }
  | { name: 'customers'; where?: Condition; title?: string; order?: SortKey; compare?: 7 | 30 }
  | { name: 'customer'; id: string }
  | { name: 'missing'; why: string }
const TITLES: Record<Name | 'missing', string> = {
  week: 'This week',
  matrix: 'Score matrix',
  customers: 'Customers',
  customer: 'Customer',
  accounts: 'Accounts',
  uploads: 'Uploads',
  webhooks: 'Webhooks',
  settings: 'Settings',
  missing: 'Not found',
}
// A service key sees its account's customers; the admin token the accounts and their settings.
const NAV: Record<Session['kind'], Listed[]> = {
  key: ['week', 'matrix', 'customers', 'uploads'],
  admin: ['accounts', 'uploads', 'webhooks', 'settings'],
}
const KEY_ONLY: Name[] = ['week', 'customer', 'customers', 'matrix']

// A fragment is anything a link or a person may type: a bad escape or JSON is "not found", never an
// exception that blanks the page. The empty fragment is the role's first view.
const decode = (text: string) => {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}
const parse = (text: string) => {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}
const viewOf = (hash: string, kind: Session['kind']): View => {
  if (hash === '' || hash === '#' || hash === '#/') return viewOf(`#/${NAV[kind][0]}`, kind)
  const [path, query] = hash.split('?', 2)
  const customer = /^#\/customer\/(.+)$/.exec(path)
  const given = customer ? 'customer' : path.slice(2)
  if (!Object.hasOwn(TITLES, given) || given === 'missing') return { name: 'missing', why: 'There is no such view.' }
  const name = given as Name
  if (kind === 'admin' && KEY_ONLY.includes(name)) {
    return { name: 'missing', why: "This view shows an account's customers: sign in with that account's key." }
  }
  if (!customer && !NAV[kind].includes(name as Listed)) {
    return { name: 'missing', why: 'This view is for the operator: enter with the admin token.' }
  }
  if (customer) {
    const id = decode(customer[1])
    return id ? { name: 'customer', id } : { name: 'missing', why: 'The customer id in the address is malformed.' }
  }
  if (name === 'week') {
    const days = new URLSearchParams(query).get('days') ?? '7'
    if (days !== '7' && days !== '30') return { name: 'missing', why: 'The period is 7 or 30 days.' }
    return { name, days: Number(days) as 7 | 30 }
  }
  if (name === 'customers' && query) {
    const params = new URLSearchParams(query)
    const where = params.get('where')
    const condition = where === null ? undefined : parse(where)
    if (!condition || typeof condition !== 'object') {
      return { name: 'missing', why: "The customers list's condition in the address is malformed." }
    }
    const [propertyName, direction] = (params.get('order') ?? '').split(':')
    const compare = params.get('compare')
    return {
      name,
      where: condition as Condition,
      title: params.get('title') ?? undefined,
      order: propertyName ? { propertyName, direction: direction === 'desc' ? 'desc' : 'asc' } : undefined,
      compare: compare === '7' || compare === '30' ? (Number(compare) as 7 | 30) : undefined,
    }
  }
  return { name } as View
}

const NotFound = ({ why, kind }: { why: string; kind: Session['kind'] }) =>
  html`<section aria-labelledby="missing-title" class="missing">
    <h1 id="missing-title">Not found</h1>
    <p>${why}</p>
    <p>Go to <a href=${`#/${NAV[kind][0]}`}>${TITLES[NAV[kind][0]]}</a>.</p>
  </section>`

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
      }${' '}It is kept in this tab's session storage only and sent to this service alone.
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

// The account the views work on, by the name people know it by: a key's own account, or the one
// the operator chose.
const AccountName = ({ session, account }: { session: Session; account: number | null }) => {
  const named = useData(
    () =>
      session.kind === 'key'
        ? keyAccount(session.secret)
        : account === null
          ? Promise.resolve(undefined)
          : admin<Account>(session.secret, 'GET', `/${account}`),
    [session.secret, account],
  )
  if (session.kind === 'admin' && account === null) return html`<span id="chosen-account">No account chosen</span>`
  const id = named.data?.id ?? account
  return html`<span id="chosen-account" data-account=${id}>
    ${named.data ? named.data.name : ''}${id !== null && html` <span class="muted">(account ${id})</span>`}
  </span>`
}

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
  const link = (name: Listed) =>
    html`<a href=${`#/${name}`} aria-current=${view.name === name ? 'page' : undefined}>${TITLES[name]}</a>`
  // The admin's views other than the list work on the chosen account.
  const needsAccount =
    session.kind === 'admin' && view.name !== 'accounts' && view.name !== 'missing' && account === null
  const body = () => {
    if (view.name === 'missing') return html`<${NotFound} why=${view.why} kind=${session.kind} />`
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
    if (view.name === 'week') return html`<${WeekView} apiKey=${key} days=${view.days} />`
    if (view.name === 'customers') {
      return html`<${Customers} key=${hash} apiKey=${key} where=${view.where} title=${view.title}
        order=${view.order} compare=${view.compare} />`
    }
    if (view.name === 'uploads') return html`<${Uploads} session=${session} account=${null} />`
    return html`<${Matrix} apiKey=${key} />`
  }
  // The skip link is the first stop of the Tab key; it moves the focus rather than the fragment, which
  // names the view.
  return html`<a class="skip-link" href="#main" onClick=${focusOn('main')}>Skip to content</a>
    <header>
      <span class="brand">Console</span>
      <nav aria-label="Views">${NAV[session.kind].map((name) => html`${link(name)} `)}</nav>
      <div class="session">
        <${AccountName} session=${session} account=${account} />
        <button type="button" onClick=${signOut}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1">${body()}</main>`
}
