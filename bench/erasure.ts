// Erasing one customer with 1,000 contacts and 200,000 tracked events (issue 36), in an account of
// 100,000 customers with 12 monthly snapshots each. Reported: the time from POST /api/v1/erasures
// to its status `done`, and the p50/p99 of other requests (point reads and a search of the same
// account) while it runs, against the same requests in the same run without an erasure.
import { connect, type Sql } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { percentile, type BenchContext } from './lib.ts'
import { seed } from './scoring.ts'
import { startServer } from './server.ts'

const CUSTOMERS = Number(process.env.BENCH_ERASURE_CUSTOMERS ?? 100_000)
const CONTACTS = 1000
const EVENTS = 200_000
const CLIENTS = 4
const BASELINE_S = 15

// The customer to erase, its contacts (with a snapshot each) and its events, all applied.
const seedPerson = async (sql: Sql, accountId: number) => {
  const [c] = await sql`
    insert into customers (account_id, external_id, name, attributes)
    values (${accountId}, 'erase-me', 'Erase Me', '{"country": "US"}') returning service_id`
  await sql`
    insert into contacts (account_id, external_id, customer_id, name, attributes)
    select ${accountId}, 'erase-me-' || i, ${c.service_id}, 'Contact ' || i,
      jsonb_build_object('email', 'contact' || i || '@erase.example')
    from generate_series(1, ${CONTACTS}) i`
  await sql`
    insert into contact_snapshots (account_id, contact_id, date, "values")
    select account_id, service_id, current_date - 1, '{"sessions": 3}' from contacts
    where account_id = ${accountId} and customer_id = ${c.service_id}`
  await sql`
    insert into tracking_events (account_id, name, occurred_at, customer_external_id,
      contact_external_id, data,
      customer_id, contact_id, status)
    select ${accountId}, 'login', now() - (i % 1000) * interval '1 hour', 'erase-me', k.external_id,
      jsonb_build_object('contact', jsonb_build_object('email', k.attributes->'email')),
      ${c.service_id}, k.service_id, 'applied'
    from generate_series(0, ${EVENTS - 1}) i
      join contacts k on k.account_id = ${accountId}
        and k.external_id = 'erase-me-' || (1 + i % ${CONTACTS})`
  await sql`vacuum analyze customers, contacts, tracking_events, contact_snapshots`
  await sql`checkpoint`
}

type Request = () => Promise<Response>

// CLIENTS loops of the mix until `until` resolves; the latencies in ms.
const load = async (requests: Request[], until: Promise<unknown>) => {
  const ms: number[] = []
  let done = false
  void until.then(() => {
    done = true
  })
  const errors: number[] = []
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let i = client; !done; i++) {
        const started = performance.now()
        const res = await requests[i % requests.length]()
        await res.arrayBuffer()
        if (!res.ok) errors.push(res.status)
        ms.push(performance.now() - started)
      }
    }),
  )
  if (errors.length)
    throw new Error(`${errors.length} requests failed: ${[...new Set(errors)].join(', ')}`)
  return ms.sort((a, b) => a - b)
}

export default async (ctx: BenchContext) => {
  const url = await ctx.database()
  const sql = connect(url)
  try {
    await migrate(sql, url)
    const accountId = await seed(sql, CUSTOMERS, 'Erasure')
    await seedPerson(sql, accountId)
    // The bench's clients are one key: its rate limit would answer most of them 429.
    const server = await startServer(url, { SERVICE_API_RATE_LIMIT: '1000000' })
    try {
      const key = await server.admin('POST', `/accounts/${accountId}/keys`, {
        scopes: ['search', 'erase'],
      })
      const call = (path: string, body?: unknown) =>
        fetch(server.base + path, {
          method: body === undefined ? 'GET' : 'POST',
          headers: { 'service-key': key.token, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        })
      const requests: Request[] = [
        () => call(`/api/v1/customer/cust-${Math.floor(Math.random() * CUSTOMERS)}`),
        () => call(`/api/v1/customer/cust-${Math.floor(Math.random() * CUSTOMERS)}/events`),
        () =>
          call('/api/v1/customers/search', {
            filters: [{ propertyName: 'country', operator: 'EQ', value: 'DE' }],
          }),
      ]
      const alone = await load(requests, new Promise((r) => setTimeout(r, BASELINE_S * 1000)))

      const started = performance.now()
      const erasure = await (await call('/api/v1/erasures', { customers: ['erase-me'] })).json()
      let status: { status: string; counts: Record<string, number> } = {
        status: 'pending',
        counts: {},
      }
      const finished = (async () => {
        while (status.status === 'pending') {
          await new Promise((r) => setTimeout(r, 100))
          status = await (await call(`/api/v1/erasures/${erasure.id}`)).json()
        }
        return (performance.now() - started) / 1000
      })()
      const during = await load(requests, finished)
      const seconds = await finished
      if (status.status !== 'done') throw new Error(`erasure ${status.status}`)
      if (status.counts.tracking_events !== EVENTS || status.counts.contacts !== CONTACTS)
        throw new Error(`counts ${JSON.stringify(status.counts)}`)

      const bench = 'erasure'
      ctx.report({
        bench,
        metric: `erase 1 customer, ${CONTACTS} contacts, ${EVENTS} events`,
        value: seconds,
        unit: 's',
      })
      for (const p of [50, 99]) {
        const base = percentile(alone, p)
        const value = percentile(during, p)
        ctx.report({
          bench,
          metric: `other requests p${p} during it`,
          value,
          unit: 'ms',
          baseline: base,
          ratio: value / base,
        })
      }
      ctx.report({
        bench,
        metric: 'other requests during it',
        value: during.length,
        unit: 'requests',
      })
    } finally {
      await server.stop()
    }
  } finally {
    await sql.end()
  }
}
