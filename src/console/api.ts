// The console's only way to the service: the public API with the account's service key, so it can
// do nothing that the key could not do with curl.

export interface Customer {
  id: string
  name: string
  fitscore: number | null
  engagementscore: number | null
  churn_risk: number | null
  upsell_score: number | null
  is_churned: boolean
  last_seen: string | null
  engagementscore_difference: number | null
  engagementscore_trend: Record<string, number> | null
  owner: string | null
  tags: string[]
  properties: Record<string, string | number | boolean | null>
}

export interface Driver {
  codename: string
  score: 'engagement' | 'fit'
  contribution: number
}

export interface CustomerDetail extends Customer {
  score_explanation: { risk_drivers: Driver[]; health_drivers: Driver[] } | null
}

export interface Contact {
  id: string
  name: string
  engagementscore: number | null
  engagementscore_difference: number | null
  last_seen: string | null
}

export interface Filter {
  propertyName: string
  operator: string
  value?: string
  values?: string[]
}

// A search's tree of filters (docs/api.md, "Trees").
export type Condition = Filter | { and: Condition[] } | { or: Condition[] } | { not: Condition }
export interface SortKey {
  propertyName: string
  direction: 'asc' | 'desc'
}
// What picks the customers: `filters` or `where`, as search, aggregates and segments take it.
export interface Selection {
  filters?: Filter[]
  where?: Condition
}

export interface Page {
  results: Customer[]
  // A number in external id order; under a sort, an opaque cursor to send back as it came.
  paging?: { next: { after: number | string } }
}

// A refusal as the service words it: Problem Details' sentence plus each place the request is wrong.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

interface Problem {
  title?: string
  detail?: string
  errors?: { path: string; message: string }[]
}

const describe = (status: number, problem: Problem | undefined) => {
  const errors = (problem?.errors ?? []).map((e) => (e.path ? `${e.path}: ${e.message}` : e.message))
  return [problem?.detail ?? problem?.title ?? `The service answered ${status}.`, ...errors].join(' ')
}

const request = async <T>(
  credentials: Record<string, string>,
  method: string,
  path: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<T> => {
  const headers: Record<string, string> = { ...credentials, accept: 'application/json' }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const json = body === undefined ? undefined : JSON.stringify(body)
  const res = await fetch(path, { method, headers, body: json, signal })
  const data = await res.json().catch(() => undefined)
  if (!res.ok) throw new ApiError(res.status, describe(res.status, data))
  return data as T
}

export const call = <T>(key: string, method: string, path: string, body?: unknown, signal?: AbortSignal) =>
  request<T>({ 'service-key': key }, method, path, body, signal)

// The admin API (/admin/v1) with the operator's token, for the accounts, uploads, webhooks and
// settings views; `path` is below the account's own address.
export const admin = <T>(token: string, method: string, path: string, body?: unknown) =>
  request<T>({ authorization: `Bearer ${token}` }, method, `/admin/v1/accounts${path}`, body)

// The events a webhook can subscribe to, as the service lists them.
export const eventTypes = (token: string) =>
  request<{ name: string; description: string }[]>({ authorization: `Bearer ${token}` }, 'GET', '/admin/v1/event-types')

export interface Search extends Selection {
  limit?: number
  after?: number | string
  sort?: SortKey[]
}

export const searchCustomers = (key: string, search: Search, signal?: AbortSignal) =>
  call<Page>(key, 'POST', '/api/v1/customers/search', search, signal)

export const getCustomer = (key: string, id: string) =>
  call<CustomerDetail>(key, 'GET', `/api/v1/customer/${encodeURIComponent(id)}`)

export const contactsOf = (key: string, customerId: string, limit: number) =>
  call<{ results: Contact[]; paging?: unknown }>(key, 'POST', '/api/v1/contacts/search', {
    filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: customerId }],
    limit,
  })

// Needs a key with the upload scope; the service refuses others with 403, which the page shows.
export const setChurned = (key: string, id: string, churned: boolean) =>
  call<Customer>(key, 'PUT', `/api/v1/customer/${encodeURIComponent(id)}`, { is_churned: churned })

export interface Segment extends Selection {
  id: number
  name: string
  sort?: SortKey[]
  members: number
}

export const listSegments = (key: string) => call<Segment[]>(key, 'GET', '/api/v1/segments')

// A saved segment's members as customer search answers its saved body, a page at a time.
export const searchSegment = (key: string, id: number, page: { limit: number; after?: number | string }) =>
  call<Page>(key, 'POST', `/api/v1/segments/${id}/search`, page)

// The sampled customers of the matrix, with both scores (docs/api.md, "Aggregates").
export interface Point {
  id: string
  name: string
  engagementscore: number
  fitscore: number
  churn_risk: number | null
}
export interface Aggregate {
  count: number
  grid?: { scored: number; counts: number[][] }
  points?: { scored: number; sampled: boolean; items: Point[] }
}
export const aggregate = (
  key: string,
  body: Selection & { matrix: 'grid' | 'points'; points?: number },
  signal?: AbortSignal,
) => call<Aggregate>(key, 'POST', '/api/v1/customers/aggregate', body, signal)

export interface Upload {
  upload_id: number
  kind: 'customers' | 'contacts'
  status: 'received' | 'processing' | 'processed' | 'failed'
  items: number
  created: number | null
  updated: number | null
  ignored: number | null
  dropped_keys: number | null
  warnings: { external_id: string; message: string }[] | null
  error: string | null
  received_at: string
  processed_at: string | null
  stuck?: boolean
}

export const listUploads = (key: string) => call<Upload[]>(key, 'GET', '/api/v1/uploads')

export interface TrackedEvent {
  id: number
  name: string
  timestamp: number
  data: unknown
  status: 'received' | 'applied' | 'unmatched'
}
export interface TrackedEvents {
  count: number
  events: TrackedEvent[]
}
export const customerEvents = (key: string, id: string, limit: number) =>
  call<TrackedEvents>(key, 'GET', `/api/v1/customer/${encodeURIComponent(id)}/events?limit=${limit}`)

// Session storage: a credential is gone when the tab closes and is never shared with other tabs.
// The service key and the admin token are kept apart; one sign-in forgets the other.
export type Session = { kind: 'key'; secret: string } | { kind: 'admin'; secret: string }
const KEY = 'console.service-key'
const ADMIN = 'console.admin-token'
const ACCOUNT = 'console.account'
export const storedSession = (): Session | null => {
  const key = sessionStorage.getItem(KEY)
  if (key) return { kind: 'key', secret: key }
  const token = sessionStorage.getItem(ADMIN)
  return token ? { kind: 'admin', secret: token } : null
}
export const storeSession = (session: Session) => {
  forgetSession()
  sessionStorage.setItem(session.kind === 'key' ? KEY : ADMIN, session.secret)
}
export const forgetSession = () => sessionStorage.clear()
// The account an admin works on, by id (not a secret).
export const storedAccount = () => Number(sessionStorage.getItem(ACCOUNT)) || null
export const storeAccount = (id: number) => sessionStorage.setItem(ACCOUNT, String(id))
