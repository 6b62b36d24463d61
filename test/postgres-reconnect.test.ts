import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect as tcp, type Socket } from 'node:net'
import postgres from 'postgres'
import { freshDatabase } from './helpers/db.ts'

// postgres.js sends what a connection writes in one turn of the event loop as one chunk, at the
// next turn. A connection that closed before that turn (the server shutting down) kept the chunk
// and the cleared timer, so its reconnection never sent its startup message: the query waiting on
// it failed with CONNECT_TIMEOUT 30 s later. After a PostgreSQL restart, that was a 503 long after
// every other connection had recovered (patches/postgres+3.4.9.patch).
test('a connection that closes with a write still unsent reconnects cleanly', async () => {
  const db = await freshDatabase()
  const url = new URL(db.url)
  let socket: Socket | undefined
  // postgres.js takes a function that opens each connection's socket; its types leave
  // the option out.
  const options = {
    max: 1,
    connect_timeout: 3,
    onnotice: () => {},
    socket: () => (socket = tcp(Number(url.port), url.hostname)),
  }
  const sql = postgres(db.url, options as postgres.Options<{}>)
  try {
    assert.deepEqual([...(await sql`select 1 as one`)], [{ one: 1 }])
    // Written during the check phase, so its flush waits for the next turn; the close callback of
    // this turn comes first.
    const lost = await new Promise<unknown>((resolve) =>
      setImmediate(() => {
        const query = sql`select 2 as two`.then(
          () => undefined,
          (err: Error) => err,
        )
        socket!.destroy()
        resolve(query)
      }),
    )
    assert.ok(lost instanceof Error, 'the query on the closed connection fails')
    assert.deepEqual([...(await sql`select 3 as three`)], [{ three: 3 }])
  } finally {
    await sql.end({ timeout: 1 })
    await db.drop()
  }
})
