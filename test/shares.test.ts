// An account's share of expensive requests (src/http/permits.ts): places, the line that waits for
// one, and the refusal past it. Pure: no service, no clock but the wait's own.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createShares } from '../src/http/permits.ts'

const isRelease = (x: unknown): x is () => void => typeof x === 'function'

test('past its places an owner waits in line, and past the line it is refused at once', async () => {
  const take = createShares(1, 1, 60_000)
  const first = take(7)
  assert.ok(isRelease(first))
  const waiting = take(7)
  assert.ok(waiting instanceof Promise)
  assert.equal(take(7), undefined)
  // Another owner has places of its own.
  assert.ok(isRelease(take(8)))
  first()
  first() // a second call gives nothing back twice
  const handed = await waiting
  assert.ok(isRelease(handed))
  // The place went to the one waiting: the owner still holds its one place.
  const next = take(7)
  assert.ok(next instanceof Promise)
  handed()
  const last = await next
  assert.ok(isRelease(last))
  last()
  assert.ok(isRelease(take(7)))
})

test('a wait ends without a place after its time, or when its client goes, and leaves the line', async () => {
  const take = createShares(1, 1, 50)
  const held = take(1)
  assert.ok(isRelease(held))
  assert.equal(await take(1), undefined)
  const gone = new AbortController()
  const leaving = take(1, gone.signal)
  gone.abort()
  assert.equal(await leaving, undefined)
  // The line is free again: the next one waits, and gets the place given back.
  const waiting = take(1)
  assert.ok(waiting instanceof Promise)
  held()
  assert.ok(isRelease(await waiting))
})
