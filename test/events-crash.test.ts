// A worker SIGKILLed in the middle of a customer.score_changed fan-out to three endpoints: after a
// restart every endpoint has every change, none twice except the delivery that was on the wire,
// and none that the database does not hold (no phantom: each event's new value is the
// stored score).
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { scoredAccount, waitForUpload } from './helpers/fixtures.ts'
import { startProcess } from './helpers/process.ts'
import { eventually, type Receiver, startReceiver } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'

let s: TestService
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 }, { http: true, worker: false })
})
after(() => s.stop())

const CUSTOMERS = 2500

test('a worker killed mid fan-out: no change lost, none phantom', async () => {
  const account = await scoredAccount(s, 'Crash')
  await s.admin('PUT', `/accounts/${account.id}/score-alerts`, { engagementscore: { delta: 1 } })
  let hold = true
  let first: () => void
  const arrived = new Promise<void>((resolve) => {
    first = resolve
  })
  // Until the kill, every delivery hangs on the wire.
  const respond = () => {
    first()
    return hold ? new Promise<number>(() => {}) : 200
  }
  const receivers: Receiver[] = []
  for (let i = 0; i < 3; i++) receivers.push(await startReceiver(respond))
  const workers: Awaited<ReturnType<typeof startProcess>>[] = []
  // In requests of 1000 (the per-request limit); resolves with the uploads' ids.
  const upload = async (date: string, logins: (i: number) => number) => {
    const ids: number[] = []
    for (let from = 0; from < CUSTOMERS; from += 1000) {
      const res = await account.api('/api/v1/customers', {
        customers: Array.from({ length: Math.min(1000, CUSTOMERS - from) }, (_, j) => ({
          external_id: `c${from + j}`,
          name: `Customer ${from + j}`,
          metrics: [{ date, logins: logins(from + j) }],
        })),
      })
      assert.equal(res.status, 200, JSON.stringify(res.body))
      ids.push(res.body.upload_id)
    }
    return ids
  }
  const scored = async (ids: number[]) => {
    for (const id of ids) await waitForUpload(account.api, id, 180_000, true)
  }
  try {
    workers.push(await startProcess(['worker'], s.url))
    // The first scoring has nothing to compare with; the subscriptions come after it.
    await scored(await upload('2026-11-01', (i) => i % 40))
    for (const r of receivers)
      await s.admin('POST', `/accounts/${account.id}/webhooks`, {
        url: r.url,
        events: ['customer.score_changed'],
      })
    const changing = await upload('2026-11-02', (i) => (i % 40) + 1 + (i % 3))
    await arrived
    await workers[0].kill('SIGKILL')
    hold = false
    workers.push(await startProcess(['worker'], s.url))
    await scored(changing)
    const deliveries = await eventually(
      async () => {
        const rows = await s.sql`
          select webhook_id, message_id, status from webhook_deliveries
            where account_id = ${account.id}`
        return rows.length > 0 && rows.every((d) => d.status === 'delivered') && rows
      },
      'every delivery delivered after the restart',
      180_000,
    )
    // Each scoring's changes in chunks of 1000, one delivery per chunk and endpoint,
    // committed once.
    assert.equal(deliveries.length % 3, 0)
    const scores = new Map(
      (
        await s.sql`
          select c.external_id, h.engagementscore from customers c join customer_scores h
            on h.account_id = c.account_id and h.customer_id = c.service_id
              where c.account_id = ${account.id}`
      ).map((r) => [r.external_id as string, r.engagementscore as number]),
    )
    for (const r of receivers) {
      const messages = new Map<string, Buffer>()
      for (const req of r.requests) {
        const id = String(req.headers['webhook-id'])
        // A retry after the crash carries the same bytes under the same webhook-id.
        if (messages.has(id)) assert.deepEqual(req.raw, messages.get(id))
        messages.set(id, req.raw)
      }
      assert.equal(messages.size, deliveries.length / 3)
      const changes = [...messages.values()].flatMap(
        (raw) => JSON.parse(raw.toString()).data.changes,
      )
      assert.equal(changes.length, CUSTOMERS)
      assert.equal(
        new Set(changes.map((c: { external_id: string }) => c.external_id)).size,
        CUSTOMERS,
      )
      for (const c of changes) assert.equal(c.new_value, scores.get(c.external_id), c.external_id)
    }
  } finally {
    hold = false
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) await w.kill('SIGKILL')
    for (const r of receivers) await r.close()
  }
})
