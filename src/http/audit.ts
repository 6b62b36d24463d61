import { ACCOUNTS } from '../accounts/accounts.ts'
import { type Change, recordChange, recordRefusal } from '../audit/entries.ts'
import type { App } from '../context.ts'
import type { Sql, Tx } from '../db/client.ts'
import { Refusal } from '../errors.ts'
import { decoded, type Reply, type Req, type Route } from '../route.ts'
import { actorOf } from './auth.ts'
import { camel } from './openapi.ts'

// The audit log's entries, written where every route row runs (router.ts invoke, which the admin
// CLI runs too), so that no row can leave its changes out: every row of a method but GET that
// authenticates its caller is audited, unless the row says it changes nothing an audit names
// (route.ts `unaudited`).
export const audited = (route: Route) =>
  route.method !== 'GET' && route.auth !== 'none' && !route.unaudited

// The transaction, handed to the handler as its pools: its statements run in it, and a module
// function's own `begin` opens a savepoint of it. Options (an isolation level) cannot apply within
// a transaction already begun, so asking for them fails at once rather than silently.
const asPool = (tx: Tx) =>
  Object.assign(tx, {
    begin: (...args: unknown[]) => {
      if (args.length !== 1)
        throw new Error('An audited change cannot set its transaction options.')
      return tx.savepoint(args[0] as (sql: Tx) => unknown)
    },
  }) as unknown as Sql

const VERSION_PREFIX = /^\/(?:[a-z]+\/)?v\d+\//
const MAX_SEGMENT = 255

// On what: the path below its version prefix, as segments with the path's values in place
// (customer/acme-1, accounts/7/keys/3), and the id of what a creation (201) made.
const targetOf = (route: Route, req: Req, status: number, body: unknown) => {
  const segments = route.path
    .replace(VERSION_PREFIX, '')
    .split('/')
    .map((s) => {
      if (!s.startsWith(':')) return s
      const raw = req.params[s.slice(1)] ?? ''
      return (decoded(raw, MAX_SEGMENT) ?? raw).slice(0, MAX_SEGMENT)
    })
  const made =
    status === 201 && body !== null && typeof body === 'object'
      ? (body as { id?: unknown }).id
      : undefined
  return typeof made === 'string' || typeof made === 'number'
    ? [...segments, String(made)]
    : segments
}

// Whose log holds the entry: the key's account, the account an admin path names, or the account
// an admin creation made; null for an operator's change that names none (a backup).
const accountOf = (route: Route, req: Req, status: number, body: unknown) => {
  if (req.auth) return req.auth.accountId
  if (/\/:id(\/|$)/.test(route.path)) {
    const n = Number(req.params.id)
    return Number.isSafeInteger(n) && n > 0 ? n : null
  }
  return route.path === ACCOUNTS && status === 201 ? (body as { id: number }).id : null
}

// An IPv4 client of a dual-stack socket is shown as itself.
const addressOf = (req: Req) => req.address?.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '') ?? null

// Runs an audited row: `check` (the input's validation), then `run` in one transaction that ends
// with the entry, so that the change and its entry commit together or not at all. A refusal (4xx)
// rolls the change back, and its entry is written after, on its own, with the status answered.
export const inChange = async (
  route: Route,
  req: Req,
  app: App,
  check: () => void,
  run: (app: App) => Reply | Promise<Reply>,
) => {
  const actor = actorOf(route, req)
  if (!actor) throw new Error(`${route.name} is audited but authenticates no one.`)
  const change = (status: number, body?: unknown): Change => ({
    accountId: accountOf(route, req, status, body),
    actor,
    action: camel(route.name),
    target: targetOf(route, req, status, body),
    status,
    address: addressOf(req),
  })
  try {
    check()
    return await app.sql.begin(async (tx) => {
      const sql = asPool(tx)
      const reply = await run({ ...app, sql, heavy: sql })
      await recordChange(tx, change(reply.status, reply.body))
      return reply
    })
  } catch (err) {
    if (err instanceof Refusal && !req.signal?.aborted)
      await recordRefusal(app.sql, change(err.status))
    throw err
  }
}
