import { createHash } from 'node:crypto'
import type { Sql } from './client.ts'

export type Scope = 'search' | 'upload' | 'track' | 'erase' | 'audit'
export const SCOPES: Scope[] = ['search', 'upload', 'track', 'erase', 'audit']
// A key gets `erase` (erasure requests, suppressions) and `audit` (the audit log) only when it is
// asked for by name.
export const DEFAULT_SCOPES: Scope[] = ['search', 'upload', 'track']

export const hashToken = (token: string) => createHash('sha256').update(token).digest()

export const WINDOW_MS = 60_000
// A process asks Postgres about a key at most this often. Between two checks it answers from what
// it knows and counts the key's requests itself; each check adds those to the shared counter and
// reads back the count of every process. So a revocation made elsewhere, and the requests other
// processes served, reach this process within this time, and a request costs no round trip.
export const CHECK_MS = 250

interface KeyRow {
  id: number
  name: string | null
  scopes: string[]
  revoked_at: Date | null
}
interface Counted {
  key: KeyRow
  count: number
  windowStart: number
}

// The key, and the requests counted here since the last check added to its counter for the window
// (none added for a revoked key). `others` is the window's count less this process's share.
const checkKey = (
  sql: Sql,
  accountId: number,
  hash: Buffer,
  bucket: string,
  windowStart: number,
  add: number,
) => sql`
  with k as (
    select id, name, scopes, revoked_at from api_keys where account_id = ${accountId}
      and token_hash = ${hash}
  ), c as (
    insert into rate_limit_counters as r (account_id, key_id, bucket, window_start, count)
    select ${accountId}, id, ${bucket}, ${new Date(windowStart)}, ${add} from k
      where revoked_at is null and ${add} > 0
    on conflict (account_id, key_id, bucket, window_start) do update
      set count = r.count + excluded.count
    returning count
  )
  select k.id, k.name, k.scopes, k.revoked_at, coalesce((select count from c), (
    select count from rate_limit_counters
    where account_id = ${accountId} and key_id = k.id and bucket = ${bucket}
      and window_start = ${new Date(windowStart)}
  ), 0) as count
  from k`

interface Entry {
  id: string
  accountId: number
  hash: Buffer
  bucket: string
  key?: KeyRow
  checkedAt: number
  windowStart: number
  // Requests this process served in the window, how many of them the counter holds, and the
  // counter's other requests as of the last check.
  local: number
  flushed: number
  others: number
  checking?: Promise<void>
  timer?: NodeJS.Timeout
}

// Only keys that exist are remembered, so unknown tokens cannot grow the map.
export const keyChecker = (sql: Sql, onError: (err: unknown) => void, now = Date.now) => {
  const entries = new Map<string, Entry>()

  const check = (e: Entry) =>
    (e.checking ??= (async () => {
      const { windowStart } = e
      const add = e.local - e.flushed
      try {
        const [row] = await checkKey(sql, e.accountId, e.hash, e.bucket, windowStart, add)
        if (!row) {
          e.key = undefined
          return void entries.delete(e.id)
        }
        e.key = {
          id: Number(row.id),
          name: row.name,
          scopes: row.scopes,
          revoked_at: row.revoked_at,
        }
        e.checkedAt = now()
        if (e.windowStart === windowStart && !row.revoked_at) {
          e.flushed += add
          e.others = Math.max(0, Number(row.count) - e.flushed)
        }
      } finally {
        e.checking = undefined
      }
    })())

  // Counts left between checks reach Postgres at the latest one interval later.
  const flushLater = (e: Entry) => {
    e.timer ??= setTimeout(() => {
      e.timer = undefined
      if (e.local > e.flushed) check(e).catch(onError)
    }, CHECK_MS).unref()
  }

  // The key behind a token and this request's number in the key's current window of the bucket,
  // or undefined when no such key exists.
  const count = async (
    accountId: number,
    token: string,
    bucket: string,
  ): Promise<Counted | undefined> => {
    const hash = hashToken(token)
    const id = `${bucket}:${hash.toString('hex')}`
    const at = now()
    const windowStart = at - (at % WINDOW_MS)
    let e = entries.get(id)
    if (!e) {
      e = {
        id,
        accountId,
        hash,
        bucket,
        checkedAt: -Infinity,
        windowStart,
        local: 0,
        flushed: 0,
        others: 0,
      }
      entries.set(id, e)
    }
    if (e.windowStart !== windowStart)
      Object.assign(e, { windowStart, local: 0, flushed: 0, others: 0 })
    const mine = ++e.local
    if (!e.key || at - e.checkedAt >= CHECK_MS) await check(e)
    if (!e.key) return undefined
    // Left over when no check ran, or when this request joined one already under way.
    if (e.local > e.flushed) flushLater(e)
    return { key: e.key, count: e.others + mine, windowStart }
  }

  return {
    count,
    // After a revocation through this process: its next requests check again at once, and the
    // counts not yet in Postgres stay counted.
    forget: () => {
      for (const e of entries.values()) e.checkedAt = -Infinity
    },
    // On stop: the counts not yet in Postgres.
    flush: async () => {
      await Promise.all(
        [...entries.values()].map((e) => {
          clearTimeout(e.timer)
          return e.local > e.flushed ? check(e) : undefined
        }),
      )
    },
  }
}

export type KeyChecker = ReturnType<typeof keyChecker>
