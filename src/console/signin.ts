import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import {
  admin,
  ApiError,
  personSession,
  rememberPerson,
  type Session,
  searchCustomers,
  setPassword,
  signInWithPassword,
  ssoStart,
  storeSession,
} from './api.ts'
import { errorLine } from './format.ts'
import { useAction, value } from './load.ts'

// The sign-in page (docs/console.md, "Signing in"): a person's email and password, their account's
// single sign-on when the address names the account, the page an invite or reset link opens, and
// under "Sign in with a key" the service key and the admin token, as before people had accounts.

type OnSignIn = (session: Session) => void

// Minutes, or seconds under one, as the lockout's Retry-After asks.
const wait = (seconds: number) =>
  seconds < 60
    ? `${seconds} seconds`
    : `${Math.ceil(seconds / 60)} minute${seconds > 60 ? 's' : ''}`

const refusal = (err: unknown, what: string) => {
  if (err instanceof ApiError && err.status === 429 && err.retryAfter)
    return `Too many failed sign-ins for this email: try again in ${wait(err.retryAfter)}.`
  const refused = err instanceof ApiError && (err.status === 401 || err.status === 403)
  return refused ? `The ${what} was refused: ${(err as Error).message}` : (err as Error).message
}

// What the address's fragment brings: an invite's or a reset's token (#password=...), or the
// account whose single sign-on the page offers (#sso=7), as Settings gives it to its people.
const fromAddress = (name: string) => new URLSearchParams(location.hash.slice(1)).get(name) ?? ''
const ssoAccount = () => {
  const id = Number(fromAddress('sso'))
  return Number.isSafeInteger(id) && id > 0 ? id : null
}

const Password = ({ onSignIn, email: given }: { onSignIn: OnSignIn; email: string }) => {
  const [email, setEmail] = useState(given)
  const [password, setSecret] = useState('')
  const action = useAction((err) => refusal(err, 'sign-in'))
  const submit = async (e: Event) => {
    e.preventDefault()
    await action.run(async () => {
      const me = await signInWithPassword(email.trim(), password)
      rememberPerson()
      onSignIn(personSession(me))
    })
  }
  return html`<form id="password-sign-in" onSubmit=${submit}>
    <label for="email">Email</label>
    <input id="email" type="email" autocomplete="username" required value=${email}
      onInput=${(e: Event) => setEmail(value(e))} />
    <label for="password">Password</label>
    <input id="password" type="password" autocomplete="current-password" required value=${password}
      onInput=${(e: Event) => setSecret(value(e))} />
    ${errorLine(action.error)}
    <button type="submit" class="primary" disabled=${action.busy}>Sign in</button>
  </form>`
}

// The identity provider's page, reached by navigating (its answer comes back to /console with the
// session cookie set). Which accounts have SSO the API tells only by starting one.
const Sso = ({ account }: { account: number }) =>
  html`<p>
    <button type="button" class="primary" onClick=${() => {
      rememberPerson()
      location.assign(ssoStart(account))
    }}>Sign in with SSO</button>
    <span class="hint"> Account ${account}'s identity provider.</span>
  </p>`

// An invite's or a reset's link: the new password, then the sign-in form with the user's email.
const NewPassword = ({ token, onSet }: { token: string; onSet: (email: string) => void }) => {
  const [password, setSecret] = useState('')
  const action = useAction()
  const submit = async (e: Event) => {
    e.preventDefault()
    await action.run(async () => {
      const user = await setPassword(token, password)
      history.replaceState(null, '', location.pathname)
      onSet(user.email)
    })
  }
  return html`<form id="new-password" onSubmit=${submit}>
    <h2>Set your password</h2>
    <label for="new-password-input">New password</label>
    <input id="new-password-input" type="password" autocomplete="new-password" required minlength="12"
      aria-describedby="new-password-hint" value=${password} onInput=${(e: Event) => setSecret(value(e))} />
    <p id="new-password-hint" class="hint">At least 12 characters, not your email. The link works once.</p>
    ${errorLine(action.error)}
    <button type="submit" class="primary" disabled=${action.busy}>Set password</button>
  </form>`
}

// One credential field with its check: a service key is proved by a search of one customer (every
// customer view searches), the admin token by the list of accounts.
const Credential = ({ kind, onSignIn }: { kind: 'key' | 'admin'; onSignIn: OnSignIn }) => {
  const [secret, setSecret] = useState('')
  const [id, label, what] =
    kind === 'key'
      ? ['service-key', 'Service key', 'key']
      : ['admin-token', 'Admin token', 'admin token']
  const action = useAction((err) => refusal(err, what))
  const submit = async (e: Event) => {
    e.preventDefault()
    await action.run(async () => {
      const given = secret.trim()
      await (kind === 'key' ? searchCustomers(given, { limit: 1 }) : admin(given, 'GET', ''))
      storeSession({ kind, secret: given })
      onSignIn({ kind, secret: given })
    })
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
    ${errorLine(action.error)}
    <button type="submit" class="primary" disabled=${action.busy}>
      ${kind === 'key' ? 'Sign in with the key' : 'Enter as operator'}
    </button>
  </form>`
}

export const SignIn = ({ onSignIn }: { onSignIn: OnSignIn }) => {
  const [token, setToken] = useState(fromAddress('password'))
  const [email, setEmail] = useState('')
  const sso = ssoAccount()
  const done = (given: string) => {
    setToken('')
    setEmail(given)
  }
  return html`<main class="signin">
    <h1>Sign in to the console</h1>
    ${
      token
        ? html`<${NewPassword} token=${token} onSet=${done} />`
        : html`${email && html`<p role="status">Your password is set: sign in with it.</p>`}
          <${Password} key=${email} email=${email} onSignIn=${onSignIn} />`
    }
    ${sso !== null && html`<${Sso} account=${sso} />`}
    <details class="with-key">
      <summary>Sign in with a key</summary>
      <${Credential} kind="key" onSignIn=${onSignIn} />
      <h2>Or as the operator</h2>
      <${Credential} kind="admin" onSignIn=${onSignIn} />
    </details>
  </main>`
}
