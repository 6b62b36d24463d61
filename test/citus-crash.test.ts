// Citus only (test/run.ts runs it in the Citus pass): a worker node killed mid-upload. An upload
// row lands on a worker and its job on the coordinator; Citus commits the two with two-phase
// commit, so after the node is back every acknowledged upload is processed and no webhook tells of
// a record that was not stored. Meanwhile /readyz names the node that is down.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startCitusCluster } from './helpers/citus.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { eventually, startReceiver } from './helpers/receiver.ts'
import { startTestService } from './helpers/service.ts'
import { subscribe } from './helpers/webhooks.ts'

test('a worker node killed mid-upload: nothing acknowledged is lost, no phantom webhook', async () => {
  // A cluster of its own: the pass's cluster serves the other files meanwhile.
  const cluster = await startCitusCluster(2, { crashSafe: true })
  Object.assign(process.env, cluster.env)
  const s = await startTestService({ apiRateLimit: 100_000 })
  const receiver = await startReceiver()
  try {
    const a = await scoredAccount(s)
    await subscribe(s, a.id, receiver.url)
    const [{ port }] = await s.sql`select nodeport as port from citus_shards
      where shardid = get_shard_id_for_distribution_column('uploads', ${a.id}::bigint)`
    const node = cluster.workers.find((w) => w.port === port)!

    // Uploads of 20 customers each, two at a time; the account's worker is killed after the
    // fifth is acknowledged and started again after the fifteenth attempt.
    const acknowledged: string[] = []
    let failed = 0
    let sent = 0
    let killed: Promise<void> | undefined
    let restarted: Promise<void> | undefined
    let down: { status: number; body: any } | undefined
    const send = async () => {
      for (;;) {
        const n = sent++
        if (n >= 30) return
        if (n === 15)
          restarted = (killed ?? Promise.resolve()).then(async () => {
            down = await s.call('GET', '/readyz')
            await cluster.restart(node)
          })
        const ids = Array.from({ length: 20 }, (_, i) => `u${n}-c${i}`)
        const res = await a
          .api('/api/v1/customers', {
            customers: ids.map((external_id) => ({ external_id, name: external_id })),
          })
          .catch(() => ({ status: 0 }))
        if (res.status === 200) acknowledged.push(...ids)
        else failed++
        if (acknowledged.length >= 100 && !killed) killed = cluster.kill(node)
        if (restarted) await restarted
      }
    }
    await Promise.all([send(), send()])
    await restarted
    assert.ok(acknowledged.length >= 100, `${acknowledged.length} records acknowledged`)
    // Readiness names the node while it is down, and comes back with it.
    assert.equal(down?.status, 503)
    assert.match(down.body.detail, new RegExp(`127\\.0\\.0\\.1:${port}\\b`))
    await eventually(
      async () => (await s.call('GET', '/readyz')).status === 200,
      'ready again',
      30_000,
    )

    // Every acknowledged upload is processed once the node is back; each record is stored once.
    await eventually(
      async () => {
        const [{ left }] = await s.sql`select count(*)::int as left from uploads
          where account_id = ${a.id} and status not in ('processed', 'failed')`
        return left === 0
      },
      'every upload done',
      120_000,
    )
    const failedUploads =
      await s.sql`select id, error from uploads where account_id = ${a.id} and status = 'failed'`
    assert.deepEqual([...failedUploads], [])
    const stored = await s.sql`select external_id from customers where account_id = ${a.id}`
    const ids = new Set(stored.map((r) => r.external_id as string))
    assert.equal(ids.size, stored.length)
    for (const id of acknowledged) assert.ok(ids.has(id), `${id} acknowledged, not stored`)

    // Every stored record's customer.created arrives, and no event names a record not stored.
    const announced = () =>
      new Set(
        receiver.requests.flatMap((r) =>
          (r.json.data.customers as { external_id: string }[]).map((c) => c.external_id),
        ),
      )
    await eventually(
      () => announced().size >= ids.size,
      'a customer.created of every stored record',
      120_000,
    )
    for (const id of announced()) assert.ok(ids.has(id), `a webhook for ${id}, which is not stored`)
    process.stdout.write(
      `# ${acknowledged.length} records acknowledged, ${failed} uploads refused while the node was down\n`,
    )
  } finally {
    await receiver.close()
    await s.stop()
    await cluster.stop()
  }
})
