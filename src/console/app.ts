import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { Accounts } from './accounts.ts'
import { useData } from './load.ts'
import { focusOn } from './format.ts'
import {
  type Account,
  admin,
  forgetPerson,
  forgetSession,
  type Condition,
  keyAccount,
  mayBeSignedIn,
  personSession,
  type Session,
  type SortKey,
  signOutPerson,
  storeAccount,
  storedAccount,
  storedSession,
  whoAmI,
} from './api.ts'
import { CustomerPage } from './customer.ts'
import { Customers } from './customers.ts'
import { Grants } from './grants.ts'
import { Matrix } from './matrix.ts'
import { PersonSettings } from './people.ts'
import { Settings } from './settings.ts'
import { SignIn } from './signin.ts'
import { Uploads } from './uploads.ts'
import { Webhooks } from './webhooks.ts'
import { WeekView } from './week.ts'

// Views live in the URL's fragment, so the service serves one page and a view can be bookmarked.
type Name =
  | 'week'
  | 'matrix'
  | 'customers'
  | 'customer'
  | 'accounts'
  | 'uploads'
  | 'webhooks'
  | 'settings'
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
// A service key sees its account's customers; the admin token the accounts and their settings; a
// person the key's views that their role's grants cover (the uploads list needs `upload`), and an
// account admin (`manage`) the account's people and audit log in Settings.
const NAV: Record<Session['kind'], Listed[]> = {
  key: ['week', 'matrix', 'customers', 'uploads'],
  admin: ['accounts', 'uploads', 'webhooks', 'settings'],
  user: ['week', 'matrix', 'customers', 'uploads', 'settings'],
}
const KEY_ONLY: Name[] = ['week', 'customer', 'customers', 'matrix']
const NEEDS: Partial<Record<Listed, string>> = { uploads: 'upload', settings: 'manage' }
const navOf = (session: Session | null) =>
  session?.kind === 'user'
    ? NAV.user.filter((name) => session.me.grants.includes(NEEDS[name] ?? 'search'))
    : NAV[session?.kind ?? 'key']

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
const viewOf = (hash: string, kind: Session['kind'], nav: Listed[]): View => {
  if (hash === '' || hash === '#' || hash === '#/') return viewOf(`#/${nav[0]}`, kind, nav)
  const [path, query] = hash.split('?', 2)
  const customer = /^#\/customer\/(.+)$/.exec(path)
  const given = customer ? 'customer' : path.slice(2)
  if (!Object.hasOwn(TITLES, given) || given === 'missing')
    return { name: 'missing', why: 'There is no such view.' }
  const name = given as Name
  if (kind === 'admin' && KEY_ONLY.includes(name)) {
    return {
      name: 'missing',
      why: "This view shows an account's customers: sign in with that account's key.",
    }
  }
  if (!customer && !nav.includes(name as Listed)) {
    const why = NAV[kind].includes(name as Listed)
      ? 'Your role does not cover this view.'
      : 'This view is for the operator: enter with the admin token.'
    return { name: 'missing', why }
  }
  if (customer) {
    const id = decode(customer[1])
    return id
      ? { name: 'customer', id }
      : { name: 'missing', why: 'The customer id in the address is malformed.' }
  }
  if (name === 'week') {
    const days = new URLSearchParams(query).get('days') ?? '7'
    if (days !== '7' && days !== '30')
      return { name: 'missing', why: 'The period is 7 or 30 days.' }
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
      order: propertyName
        ? { propertyName, direction: direction === 'desc' ? 'desc' : 'asc' }
        : undefined,
      compare: compare === '7' || compare === '30' ? (Number(compare) as 7 | 30) : undefined,
    }
  }
  return { name } as View
}

const NotFound = ({ why, nav }: { why: string; nav: Listed[] }) =>
  html`<section aria-labelledby="missing-title" class="missing">
    <h1 id="missing-title">Not found</h1>
    <p>${why}</p>
    <p>Go to <a href=${`#/${nav[0]}`}>${TITLES[nav[0]]}</a>.</p>
  </section>`

// The account the views work on, by the name people know it by: a key's own account, or the one
// the operator chose.
const AccountName = ({ session, account }: { session: Session; account: number | null }) => {
  const named = useData(
    () =>
      session.kind === 'user'
        ? Promise.resolve(session.me.account)
        : session.kind === 'key'
          ? keyAccount(session.secret)
          : account === null
            ? Promise.resolve(undefined)
            : admin<Account>(session.secret, 'GET', `/${account}`),
    [session.secret, account],
  )
  if (session.kind === 'admin' && account === null)
    return html`<span id="chosen-account">No account chosen</span>`
  const id = named.data?.id ?? account
  return html`<span id="chosen-account" data-account=${id}>
    ${named.data ? named.data.name : ''}${id !== null && html` <span class="muted">(account ${id})</span>`}
  </span>`
}

// The person signed in, and their role.
const Person = ({ me }: { me: Extract<Session, { kind: 'user' }>['me'] }) =>
  html`<span id="signed-in" data-role=${me.user.role}>
    ${me.user.name ?? me.user.email} <span class="muted">(${me.user.role})</span>
  </span>`

// A person's session is a cookie only the service reads: the page asks who it is, once, when this
// browser may have one (a page that never signed a person in asks nothing).
const usePersonSession = (setSession: (s: Session | null) => void, started: boolean) => {
  const [checking, setChecking] = useState(!started && mayBeSignedIn())
  useEffect(() => {
    if (!checking) return
    whoAmI()
      .then((me) => setSession(personSession(me)))
      .catch(() => forgetPerson())
      .finally(() => setChecking(false))
  }, [])
  return checking
}

export const App = () => {
  const [session, setSession] = useState(storedSession())
  const checking = usePersonSession(setSession, session !== null)
  const [account, setAccount] = useState(storedAccount())
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const follow = () => setHash(location.hash)
    addEventListener('hashchange', follow)
    // A change between the first render and this effect raised no event that was listened to.
    follow()
    return () => removeEventListener('hashchange', follow)
  }, [])
  const nav = navOf(session)
  const view = viewOf(hash, session?.kind ?? 'key', nav)
  useEffect(() => {
    document.title = `${session ? TITLES[view.name] : 'Sign in'} · Console`
  }, [session, view.name])

  if (checking) return html`<main class="signin"><p role="status">Signing in…</p></main>`
  if (!session) return html`<${SignIn} onSignIn=${setSession} />`
  // A person's session ends on the service (everywhere at once); a refusal (it had ended already)
  // changes nothing here.
  const signOut = async () => {
    if (session.kind === 'user') await signOutPerson(session.me).catch(() => undefined)
    forgetPerson()
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
    session.kind === 'admin' &&
    view.name !== 'accounts' &&
    view.name !== 'missing' &&
    account === null
  const body = () => {
    if (view.name === 'missing') return html`<${NotFound} why=${view.why} nav=${nav} />`
    if (needsAccount)
      return html`<p>Choose an account first, in <a href="#/accounts">Accounts</a>.</p>`
    if (session.kind === 'admin') {
      const token = session.secret
      if (view.name === 'webhooks') return html`<${Webhooks} token=${token} account=${account} />`
      if (view.name === 'settings') return html`<${Settings} token=${token} account=${account} />`
      if (view.name === 'uploads') return html`<${Uploads} session=${session} account=${account} />`
      return html`<${Accounts} token=${token} chosen=${account} onChoose=${choose} />`
    }
    const key = session.secret
    if (view.name === 'settings' && session.kind === 'user') {
      const { me } = session
      return html`<${PersonSettings} credential=${key} account=${me.account.id} self=${me.user.id} />`
    }
    if (view.name === 'customer') return html`<${CustomerPage} apiKey=${key} id=${view.id} />`
    if (view.name === 'week') return html`<${WeekView} apiKey=${key} days=${view.days} />`
    if (view.name === 'customers') {
      return html`<${Customers} key=${hash} apiKey=${key} where=${view.where} title=${view.title}
        order=${view.order} compare=${view.compare} />`
    }
    if (view.name === 'uploads') return html`<${Uploads} session=${session} account=${null} />`
    return html`<${Matrix} apiKey=${key} />`
  }
  // The skip link is the first stop of the Tab key; it moves the focus rather than the fragment,
  // which names the view.
  return html`<${Grants.Provider} value=${session.kind === 'user' ? session.me.grants : null}>
    <a class="skip-link" href="#main" onClick=${focusOn('main')}>Skip to content</a>
    <header>
      <span class="brand">Console</span>
      <nav aria-label="Views">${nav.map((name) => html`${link(name)} `)}</nav>
      <div class="session">
        ${session.kind === 'user' && html`<${Person} me=${session.me} />`}
        <${AccountName} session=${session} account=${account} />
        <button type="button" onClick=${signOut}>Sign out</button>
      </div>
    </header>
    <main id="main" tabindex="-1">${body()}</main>
  </${Grants.Provider}>`
}
