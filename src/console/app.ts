import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { ApiError, forgetKey, searchCustomers, storedKey, storeKey } from './api.ts'
import { CustomerPage } from './customer.ts'
import { Customers } from './customers.ts'
import { Matrix } from './matrix.ts'

// Views live in the URL's fragment, so the service serves one page and a view can be bookmarked.
type View = { name: 'matrix' } | { name: 'customers' } | { name: 'customer'; id: string }
const viewOf = (hash: string): View => {
  const customer = /^#\/customer\/(.+)$/.exec(hash)
  if (customer) return { name: 'customer', id: decodeURIComponent(customer[1]) }
  return hash === '#/customers' ? { name: 'customers' } : { name: 'matrix' }
}
const TITLES = { matrix: 'Score matrix', customers: 'Customers', customer: 'Customer' }

const SignIn = ({ onSignIn }: { onSignIn: (key: string) => void }) => {
  const [key, setKey] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    try {
      // Every view searches, so a search of one customer proves both the key and its scope.
      await searchCustomers(key.trim(), { limit: 1 })
      storeKey(key.trim())
      onSignIn(key.trim())
    } catch (err) {
      const refused = err instanceof ApiError && (err.status === 401 || err.status === 403)
      setError(refused ? `The key was refused: ${(err as Error).message}` : (err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  return html`<main class="signin">
    <h1>Sign in to the console</h1>
    <form onSubmit=${submit}>
      <label for="service-key">Service key</label>
      <input id="service-key" type="password" autocomplete="off" spellcheck="false" required value=${key}
        aria-describedby="service-key-hint"
        onInput=${(e: Event) => setKey((e.currentTarget as HTMLInputElement).value)} />
      <p id="service-key-hint" class="hint">
        An account's key with the search scope (sk_…). It is kept in this tab's session storage only and
        sent to this service alone.
      </p>
      ${error && html`<p role="alert" class="error">${error}</p>`}
      <button type="submit" class="primary" disabled=${busy}>Sign in</button>
    </form>
  </main>`
}

export const App = () => {
  const [key, setKey] = useState(storedKey())
  const [view, setView] = useState(viewOf(location.hash))
  useEffect(() => {
    const follow = () => setView(viewOf(location.hash))
    addEventListener('hashchange', follow)
    return () => removeEventListener('hashchange', follow)
  }, [])
  useEffect(() => {
    document.title = `${key ? TITLES[view.name] : 'Sign in'} · Console`
  }, [key, view])

  if (!key) return html`<${SignIn} onSignIn=${setKey} />`
  const signOut = () => {
    forgetKey()
    setKey(null)
  }
  const link = (name: View['name'], href: string, text: string) =>
    html`<a href=${href} aria-current=${view.name === name ? 'page' : undefined}>${text}</a>`
  return html`<header>
      <span class="brand">Console</span>
      <nav aria-label="Views">
        ${link('matrix', '#/matrix', 'Score matrix')} ${link('customers', '#/customers', 'Customers')}
      </nav>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main>
      ${
        view.name === 'customer'
          ? html`<${CustomerPage} apiKey=${key} id=${view.id} />`
          : view.name === 'customers'
            ? html`<${Customers} apiKey=${key} />`
            : html`<${Matrix} apiKey=${key} />`
      }
    </main>`
}
