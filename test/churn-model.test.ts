// The learned churn probability through the HTTP API (SPEC 13): refusals, a training as a job,
// its evaluation against customers uploaded after it, the probability on every customer object, the
// drivers of the single read, the search filter and sort, and customer.score_changed on it.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { loadConfig } from '../src/config.ts'
import { crontab } from '../src/jobs/tasks.ts'
import { auc } from '../src/learn/evaluate.ts'
import { uploadAndWait } from './helpers/fixtures.ts'
import { validator } from './helpers/openapi.ts'
import { eventually, startReceiver } from './helpers/receiver.ts'
import { startTestService, type TestService } from './helpers/service.ts'
import { CHURN_DEFS, type Generated, generate } from './helpers/churn-data.ts'

let s: TestService
before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
})
after(async () => {
  await s?.stop()
})

const TODAY = new Date().toISOString().slice(0, 10)
type Account = Awaited<ReturnType<TestService['account']>>

const define = async (a: Account) => {
  for (const d of CHURN_DEFS) {
    const res = await s.admin('POST', `/accounts/${a.id}/properties`, { entity: 'customer', ...d })
    assert.equal(res.status, 201, JSON.stringify(res.body))
  }
  const rules = {
    customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] },
  }
  assert.equal((await s.admin('PUT', `/accounts/${a.id}/scoring`, rules)).status, 200)
}

// Uploads the customers, then marks the churned ones (a label the API sets one customer at a time
// with PUT /api/v1/customer/{id}; set here in one statement for a thousand).
const upload = async (a: Account, customers: Generated[], prefix: string) => {
  const items = customers.map((c) => ({
    external_id: `${prefix}${c.id}`,
    name: c.id,
    attributes: c.attributes,
    metrics: c.snapshots.map((x) => ({ date: x.date, ...x.values })),
  }))
  for (let i = 0; i < items.length; i += 1000)
    await uploadAndWait(a.api, 'customers', items.slice(i, i + 1000), { scored: true })
  const churned = customers.filter((c) => c.churned)
  await s.sql`
    update customers c set is_churned = true, churned_date = u.d, churn_reason = 'manual'
    from unnest(${churned.map((c) => `${prefix}${c.id}`)}::text[],
      ${churned.map((c) => c.churnedDate!)}::date[]) u(id, d)
    where c.account_id = ${a.id} and c.external_id = u.id`
}

const waitReady = async (a: Account, status = 'ready') => {
  const deadline = Date.now() + 120_000
  for (;;) {
    const res = await a.api('/api/v1/churn-model', undefined, 'GET')
    assert.equal(res.status, 200)
    if (res.body.status === status) return res.body
    if (res.body.status !== 'training') assert.fail(JSON.stringify(res.body))
    if (Date.now() > deadline) throw new Error('the training did not end')
    await new Promise((r) => setTimeout(r, 200))
  }
}

const search = async (a: Account, body: object) => {
  const res = await a.api('/api/v1/customers/search', { limit: 1000, ...body })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.results as { id: string; churn_probability: number | null; is_churned: boolean }[]
}

test('refusals: too few labels (422 naming both counts), an unknown feature (400 with did you mean)', async () => {
  const a = await s.account()
  await define(a)
  const none = await a.api('/api/v1/churn-model', undefined, 'GET')
  assert.equal(none.body.status, 'none')
  await upload(
    a,
    generate(60, 'linear', 9, TODAY).map((c, i) => ({
      ...c,
      churned: i < 5,
      churnedDate: i < 5 ? TODAY : null,
    })),
    'x',
  )
  const few = await a.api('/api/v1/churn-model/train', {})
  assert.equal(few.status, 422, JSON.stringify(few.body))
  assert.match(few.body.detail ?? few.body.title, /5 churned and 55 active/)
  const typo = await a.api('/api/v1/churn-model/train', { features: ['plan', 'loggins'] })
  assert.equal(typo.status, 400)
  assert.match(JSON.stringify(typo.body), /features\/1.*did you mean logins/)
  const customer = await a.api('/api/v1/customer/xc0', undefined, 'GET')
  assert.equal(customer.body.churn_probability, null)
  assert.equal(customer.body.churn_drivers, null)
})

const TRAINING =
  'a training: its cross-validated AUC predicts the AUC on customers uploaded after it, which are scored by it'
test(TRAINING, async () => {
  const a = await s.account()
  await define(a)
  await upload(a, generate(1500, 'interaction', 1, TODAY), 't')
  // A training left 'training' for over an hour (its worker died) does not block a new one.
  await s.sql`insert into churn_models (account_id, status, started_at)
    values (${a.id}, 'training', now() - interval '2 hours')`
  const started = await a.api('/api/v1/churn-model/train')
  assert.equal(started.status, 202, JSON.stringify(started.body))
  assert.equal(started.body.status, 'training')
  assert.ok(Date.now() - Date.parse(started.body.started_at) < 60_000, started.body.started_at)
  // A second request while it runs is answered as it is.
  const again = await a.api('/api/v1/churn-model/train', {})
  assert.equal(again.status, 202)
  assert.equal(again.body.started_at, started.body.started_at)
  const model = await waitReady(a)
  assert.equal(model.algorithm, 'gradient_boosted_trees')
  assert.ok(model.training.churned >= 20 && model.training.customers === 1500)
  const { auc: reported, auc_low, auc_high } = model.evaluation
  assert.ok(
    auc_low < reported && reported < auc_high && reported > 0.8,
    JSON.stringify(model.evaluation),
  )
  assert.equal(model.features.length, CHURN_DEFS.length + 3)
  assert.ok(
    ['seats', 'logins', 'tickets'].includes(model.features[0].codename),
    JSON.stringify(model.features),
  )

  // Every training customer has a probability.
  const trained = await search(a, {
    filters: [{ propertyName: 'churn_probability', operator: 'UNKNOWN' }],
  })
  assert.equal(trained.length, 0)

  // Customers it never saw, uploaded after it: scored as they are processed, trained_at kept.
  const held = generate(800, 'interaction', 2, TODAY)
  await upload(a, held, 'h')
  const byId = new Map(
    (
      await search(a, {
        filters: [
          { propertyName: 'external_id', operator: 'IN', values: held.map((c) => `h${c.id}`) },
          { propertyName: 'is_churned', operator: 'KNOWN' },
        ],
      })
    ).map((c) => [c.id, c.churn_probability]),
  )
  assert.equal(byId.size, 800)
  const p = Float64Array.from(held, (c) => byId.get(`h${c.id}`) as number)
  const measured = auc(
    p,
    Float64Array.from(held, (c) => (c.churned ? 1 : 0)),
  )
  assert.ok(Math.abs(measured - reported) <= 0.03, `reported ${reported}, held out ${measured}`)
  const after = await a.api('/api/v1/churn-model', undefined, 'GET')
  assert.equal(after.body.trained_at, model.trained_at)

  // The single read's drivers: at most 3 each way, labelled, the right sign.
  const one = await a.api('/api/v1/customer/hc0', undefined, 'GET')
  assert.equal(one.status, 200)
  const { up, down } = one.body.churn_drivers
  assert.ok(up.length <= 3 && down.length <= 3 && up.length + down.length > 0)
  assert.ok(up.every((d: { contribution: number }) => d.contribution > 0))
  assert.ok(down.every((d: { contribution: number }) => d.contribution < 0))

  // A filter and a sort key, paged.
  const risky = await search(a, {
    filters: [{ propertyName: 'churn_probability', operator: 'GTE', value: '0.5' }],
    sort: [{ propertyName: 'churn_probability', direction: 'desc' }],
    limit: 50,
  })
  assert.ok(risky.length > 0 && risky.every((c) => (c.churn_probability as number) >= 0.5))
  for (let i = 1; i < risky.length; i++)
    assert.ok((risky[i - 1].churn_probability as number) >= (risky[i].churn_probability as number))

  // The retrain cron (SERVICE_CHURN_MODEL_RETRAIN) fans out a training per account; one that fails
  // (here: no churned customer left) says why, and the model trained before keeps serving.
  assert.ok(
    crontab(loadConfig({ SERVICE_CHURN_MODEL_RETRAIN: '0 4 * * 1' })).includes(
      '0 4 * * 1 train_churn_model',
    ),
  )
  assert.ok(!crontab(loadConfig({})).some((line) => line.includes('train_churn_model')))
  await s.sql`update customers set is_churned = false, churned_date = null, churn_reason = null
    where account_id = ${a.id}`
  // As the cron adds it: the worker runs the task on its own connections, which may
  // touch every shard.
  const [cron] =
    await s.sql`select id from graphile_worker.add_job('train_churn_model', '{}'::json)`
  const gone = async () =>
    (await s.sql`select 1 from graphile_worker._private_jobs where id = ${cron.id}`).length === 0
  await eventually(gone, 'the retrain cron to run', 120_000)
  const failed = await waitReady(a, 'failed')
  assert.match(failed.error, /0 churned and 2300 active/)
  assert.equal(failed.trained_at, model.trained_at)
  assert.deepEqual(failed.evaluation, model.evaluation)
  const still = await a.api('/api/v1/customer/hc0', undefined, 'GET')
  assert.equal(typeof still.body.churn_probability, 'number')
  assert.ok(still.body.churn_drivers.up.length + still.body.churn_drivers.down.length > 0)
})

const ALERT_TITLE = 'customer.score_changed on churn_probability: thresholds and delta in 0..1'
test(`${ALERT_TITLE}, after a training and as processed`, async () => {
  const a = await s.account()
  await define(a)
  const put = (body: object) => s.admin('PUT', `/accounts/${a.id}/score-alerts`, body)
  for (const [body, path] of [
    [{ churn_probability: { thresholds: [1.5] } }, '/churn_probability/thresholds/0'],
    [{ churn_probability: { thresholds: [-0.1] } }, '/churn_probability/thresholds/0'],
    [{ churn_probability: { delta: 0 } }, '/churn_probability/delta'],
    [{ churn_probability: { delta: 2 } }, '/churn_probability/delta'],
  ] as const) {
    const res = await put(body)
    assert.equal(res.status, 400, JSON.stringify(body))
    assert.equal(res.body.errors[0].path, path, JSON.stringify(res.body))
  }
  const r = await startReceiver()
  const hook = await s.admin('POST', `/accounts/${a.id}/webhooks`, {
    url: r.url,
    events: ['customer.score_changed'],
  })
  assert.equal(hook.status, 201)
  const types = (await s.admin('GET', '/event-types')).body
  const schema = types.find((t: any) => t.name === 'customer.score_changed').schema
  const valid = validator({ formats: true }).compile(schema)
  const changes = () =>
    r.requests.flatMap((req) => {
      assert.ok(valid(req.json), JSON.stringify(req.json))
      return (req.json as any).data.changes as any[]
    })
  const quiet = () =>
    eventually(
      async () =>
        (
          await s.sql`select count(*)::int as n from graphile_worker._private_jobs
            where payload->>'account_id' = ${String(a.id)}`
        )[0].n === 0,
      'jobs done',
    )
  // Of every customer, churned or not (search leaves the churned out).
  const probabilities = async () =>
    new Map(
      (
        await s.sql`select external_id, churn_probability from customer_scores
          where account_id = ${a.id}`
      ).map((c) => [c.external_id as string, c.churn_probability as number]),
    )
  try {
    await upload(a, generate(400, 'linear', 5, TODAY), 'p')
    assert.deepEqual((await put({ churn_probability: { thresholds: [0.5] } })).body, {
      churn_probability: { thresholds: [0.5] },
    })
    await quiet()
    // The first training: no probability before it, so nothing to announce.
    assert.equal((await a.api('/api/v1/churn-model/train', {})).status, 202)
    await waitReady(a)
    await quiet()
    assert.equal(r.requests.length, 0)
    const first = await probabilities()

    // Labels changed, a second training: each customer whose probability crossed 0.5,
    // and only those.
    await s.sql`
      update customers set is_churned = not is_churned,
        churned_date = case when is_churned then null else ${TODAY}::date end,
        churn_reason = case when is_churned then null else 'manual' end
      where account_id = ${a.id} and service_id % 5 = 0`
    assert.equal((await a.api('/api/v1/churn-model/train', {})).status, 202)
    await waitReady(a)
    await quiet()
    const second = await probabilities()
    const crossed = [...second]
      .filter(([id, p]) => first.get(id)! >= 0.5 !== p! >= 0.5)
      .map(([id]) => id)
    assert.ok(crossed.length > 0, 'the relabelling moved some customer across 0.5')
    await eventually(async () => changes().length === crossed.length, 'the crossings announced')
    const announced = changes()
    assert.deepEqual(announced.map((c) => c.external_id).sort(), crossed.sort())
    for (const c of announced) {
      assert.deepEqual([c.score, c.crossed], ['churn_probability', 0.5])
      assert.deepEqual(
        [c.old_value, c.new_value],
        [first.get(c.external_id), second.get(c.external_id)],
      )
    }

    // A delta, as a customer is processed: an active customer's attributes become those of
    // the likeliest churner's.
    await put({ churn_probability: { delta: 0.01 } })
    await quiet()
    const seen = r.requests.length
    const active = (
      await search(a, { sort: [{ propertyName: 'churn_probability', direction: 'asc' }] })
    ).map((c) => c.id)
    const [low, high] = [active[0], active.at(-1)!]
    const highest = (await a.api(`/api/v1/customer/${high}`, undefined, 'GET')).body
    const attributes = Object.fromEntries(
      CHURN_DEFS.filter((d) => d.kind === 'attribute').map((d) => [
        d.codename,
        highest.properties[d.codename],
      ]),
    )
    await uploadAndWait(a.api, 'customers', [{ external_id: low, name: low, attributes }], {
      scored: true,
    })
    await quiet()
    const moved = (await a.api(`/api/v1/customer/${low}`, undefined, 'GET')).body.churn_probability
    assert.ok(moved - second.get(low)! >= 0.01, `${second.get(low)} -> ${moved}`)
    await eventually(async () => r.requests.length > seen, 'the move announced')
    const [last] = changes().slice(announced.length)
    assert.deepEqual(
      [last.external_id, last.score, last.old_value, last.new_value, last.crossed],
      [low, 'churn_probability', second.get(low), moved, null],
    )
  } finally {
    await r.close()
  }
})
