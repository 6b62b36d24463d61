// POST /api/v1/customers/aggregate: every figure checked against the same figure computed here
// from the uploaded data, the sample against the MD5 order computed here, tenant isolation, and
// refusals naming their paths.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { startTestService, type Call, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { dayAgo, upload } from './helpers/search.ts'
import { storeScores } from './helpers/db.ts'

type Account = Awaited<ReturnType<TestService['account']>>

interface Row {
  id: string
  name: string
  country: string
  arr?: number
  logins?: number
  churned: boolean
  scores?: {
    engagementscore: number | null
    fitscore: number | null
    churn_risk: number | null
    upsell_score: number
  }
}

let s: TestService
let acme: Account
let other: Account
let rows: Row[]

// A fixed pseudo-random sequence, so that a failure reproduces.
const random = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31
  return seed / 2 ** 31
}

const makeRows = (count: number, seed: number): Row[] => {
  const next = random(seed)
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  return Array.from({ length: count }, (_, i) => {
    const scored = i % 7 !== 3
    return {
      id: `cust-${i}`,
      name: `Customer ${i}`,
      country: ['US', 'DE', 'FR'][i % 3],
      // Halves, so that every bucket bound is exact in binary and in numeric alike.
      ...(i % 5 !== 0 && { arr: int(0, 4000) / 2 }),
      ...(i % 4 !== 1 && { logins: int(0, 90) }),
      churned: i % 9 === 8,
      ...(scored && {
        scores: {
          engagementscore: i % 11 === 5 ? null : int(-100, 100),
          fitscore: int(-100, 100),
          churn_risk: i % 6 === 0 ? null : int(0, 100),
          upsell_score: int(0, 100),
        },
      }),
    }
  })
}

const seed = async (account: Account, data: Row[]) => {
  await s.admin('POST', `/accounts/${account.id}/properties`, {
    entity: 'customer',
    kind: 'attribute',
    codename: 'arr',
    type: 'number',
  })
  await upload(
    account,
    'customers',
    data.map((r) => ({
      external_id: r.id,
      name: r.name,
      attributes: { country: r.country, ...(r.arr !== undefined && { arr: r.arr }) },
      metrics:
        r.logins === undefined
          ? []
          : [
              { date: dayAgo(30), logins: 1000 },
              { date: dayAgo(2), logins: r.logins },
            ],
    })),
  )
  const churned = data.filter((r) => r.churned).map((r) => r.id)
  await s.sql`update customers set is_churned = true where account_id = ${account.id}
    and external_id = any(${churned})`
  // Every record was scored on upload; the unscored ones lose their scores, the others get these.
  const unscored = data.filter((r) => !r.scores).map((r) => r.id)
  await s.sql`delete from customer_scores where account_id = ${account.id} and customer_id in
    (select service_id from customers where account_id = ${account.id}
      and external_id = any(${unscored}))`
  await storeScores(
    s.sql,
    'customers',
    account.id,
    data.flatMap((r) => (r.scores ? [{ external_id: r.id, ...r.scores }] : [])),
  )
}

before(async () => {
  s = await startTestService()
  acme = await scoredAccount(s)
  other = await scoredAccount(s, 'Other')
  rows = makeRows(120, 7)
  await seed(acme, rows)
  // The same external ids with other values: nothing of it may show in acme's figures.
  await seed(
    other,
    makeRows(80, 99).map((r) => ({ ...r, name: `Other ${r.id}` })),
  )
})
after(() => s?.stop())

const aggregate = async (account: Account, body: unknown) => {
  const res = await account.api('/api/v1/customers/aggregate', body)
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}

const errorPaths = (res: Call) => {
  assert.equal(res.status, 400, JSON.stringify(res.body))
  assert.equal(res.headers.get('content-type'), 'application/problem+json')
  return (res.body.errors as { path: string }[]).map((e) => e.path)
}

// What the service should answer, computed from `data`.
const expectedField = (values: number[], buckets: number) => {
  if (values.length === 0) return { count: 0, avg: null, min: null, max: null, histogram: [] }
  const [lo, hi] = [Math.min(...values), Math.max(...values)]
  const counts = new Array(buckets).fill(0)
  for (const x of values)
    counts[Math.min(buckets - 1, Math.floor(((x - lo) * buckets) / (hi - lo)))]++
  return {
    count: values.length,
    avg: values.reduce((a, b) => a + b, 0) / values.length,
    min: lo,
    max: hi,
    histogram:
      lo === hi
        ? [{ from: lo, to: hi, count: values.length }]
        : counts.map((count, k) => ({
            from: lo + ((hi - lo) * k) / buckets,
            to: k === buckets - 1 ? hi : lo + ((hi - lo) * (k + 1)) / buckets,
            count,
          })),
  }
}

const cell = (score: number) => Math.min(9, Math.floor((score + 100) / 20))
const md5 = (id: string) => createHash('md5').update(id).digest('hex')
const bothScores = (r: Row) => r.scores?.engagementscore != null && r.scores.fitscore != null

// Floats from Postgres' avg against ours: equal to the last few bits.
const assertField = (actual: any, expected: ReturnType<typeof expectedField>, field: string) => {
  assert.equal(actual.field, field)
  if (expected.avg === null) assert.equal(actual.avg, null)
  else
    assert.ok(
      Math.abs(actual.avg - expected.avg) < 1e-9 * Math.max(1, Math.abs(expected.avg)),
      field,
    )
  assert.deepEqual({ ...actual, avg: 0 }, { field, ...expected, avg: 0 })
}

test('count, statistics and histograms match the uploaded data, with the churn default', async () => {
  const active = rows.filter((r) => !r.churned)
  const body = await aggregate(acme, {
    fields: ['upsell_score', 'arr', 'logins', 'churn_risk'],
    buckets: 7,
  })
  assert.equal(body.count, active.length)
  assert.equal(body.fields.length, 4)
  const values = (pick: (r: Row) => number | null | undefined) =>
    active.flatMap((r) => {
      const x = pick(r)
      return x === null || x === undefined ? [] : [x]
    })
  assertField(
    body.fields[0],
    expectedField(
      values((r) => r.scores?.upsell_score),
      7,
    ),
    'upsell_score',
  )
  assertField(
    body.fields[1],
    expectedField(
      values((r) => r.arr),
      7,
    ),
    'arr',
  )
  // logins is a metric: the latest snapshot's value, not the earlier 1000.
  assertField(
    body.fields[2],
    expectedField(
      values((r) => r.logins),
      7,
    ),
    'logins',
  )
  assertField(
    body.fields[3],
    expectedField(
      values((r) => r.scores?.churn_risk),
      7,
    ),
    'churn_risk',
  )
  assert.equal(body.grid, undefined)
  assert.equal(body.points, undefined)
})

test('the same filter tree as search decides the matches', async () => {
  const where = {
    and: [
      { propertyName: 'country', operator: 'IN', values: ['US', 'DE'] },
      {
        or: [
          { propertyName: 'is_churned', operator: 'EQ', value: 'true' },
          { propertyName: 'arr', operator: 'GT', value: '900' },
        ],
      },
    ],
  }
  const matches = rows.filter((r) => r.country !== 'FR' && (r.churned || (r.arr ?? -1) > 900))
  const body = await aggregate(acme, { where, fields: ['arr'] })
  assert.equal(body.count, matches.length)
  assertField(
    body.fields[0],
    expectedField(
      matches.flatMap((r) => r.arr ?? []),
      10,
    ),
    'arr',
  )
  const search = await acme.api('/api/v1/customers/search', { where, count: 'exact', limit: 1 })
  assert.equal(search.body.total, body.count)

  const filtered = await aggregate(acme, {
    filters: [{ propertyName: 'country', operator: 'EQ', value: 'FR' }],
  })
  assert.equal(filtered.count, rows.filter((r) => r.country === 'FR' && !r.churned).length)
  assert.deepEqual(filtered.fields, [])
})

// Without a churn model no cell has a mean probability.
const noProbabilities = () => Array.from({ length: 10 }, () => new Array(10).fill(null))

test('a field with one value has one bucket; none without values', async () => {
  const one = rows.find((r) => !r.churned && r.arr !== undefined)!
  const body = await aggregate(acme, {
    filters: [{ propertyName: 'name', operator: 'EQ', value: one.name }],
    fields: ['arr', 'seats'],
  })
  assert.equal(body.count, 1)
  assert.deepEqual(body.fields, [
    {
      field: 'arr',
      count: 1,
      avg: one.arr,
      min: one.arr,
      max: one.arr,
      histogram: [{ from: one.arr, to: one.arr, count: 1 }],
    },
    { field: 'seats', count: 0, avg: null, min: null, max: null, histogram: [] },
  ])
  // Equal numbers that print differently in a jsonb bag still make one bucket.
  const [a, b] = rows.filter((r) => !r.churned && r.arr !== undefined).slice(1, 3)
  const setArr = (id: string, arr: string) =>
    s.sql`update customers set attributes = attributes || jsonb_build_object('arr', ${arr}::numeric)
      where account_id = ${acme.id} and external_id = ${id}`
  await setArr(a.id, '2.0')
  await setArr(b.id, '2.00')
  const names = {
    filters: [{ propertyName: 'name', operator: 'IN', values: [a.name, b.name] }],
    fields: ['arr'],
  }
  assert.deepEqual((await aggregate(acme, names)).fields[0].histogram, [
    { from: 2, to: 2, count: 2 },
  ])
  await setArr(a.id, String(a.arr))
  await setArr(b.id, String(b.arr))
  const none = await aggregate(acme, {
    filters: [{ propertyName: 'name', operator: 'EQ', value: 'nobody' }],
    fields: ['arr'],
    matrix: 'grid',
  })
  assert.equal(none.count, 0)
  assert.deepEqual(none.fields, [
    { field: 'arr', count: 0, avg: null, min: null, max: null, histogram: [] },
  ])
  assert.deepEqual(none.grid, {
    scored: 0,
    counts: Array.from({ length: 10 }, () => new Array(10).fill(0)),
    churn_probability: noProbabilities(),
  })
})

test('the engagement x fit grid counts the matches scored on both', async () => {
  const active = rows.filter((r) => !r.churned)
  const counts = Array.from({ length: 10 }, () => new Array(10).fill(0))
  const scored = active.filter(bothScores)
  for (const r of scored) counts[cell(r.scores!.engagementscore!)][cell(r.scores!.fitscore!)]++
  const body = await aggregate(acme, { matrix: 'grid' })
  assert.equal(body.count, active.length)
  // No churn model here: no cell has a mean probability (test/console-churn.test.ts has one).
  assert.deepEqual(body.grid, {
    scored: scored.length,
    counts,
    churn_probability: noProbabilities(),
  })
  // Scores at the edges: -100 in the first cell, 100 in the last, 79 and 80 apart.
  assert.deepEqual(
    [cell(-100), cell(-81), cell(-80), cell(79), cell(80), cell(100)],
    [0, 0, 1, 8, 9, 9],
  )
})

test('points: all of them up to the limit, beyond it the same MD5-ordered sample every time', async () => {
  const active = rows.filter((r) => !r.churned)
  const scored = active.filter(bothScores)
  const point = (r: Row) => ({
    id: r.id,
    name: r.name,
    engagementscore: r.scores!.engagementscore,
    fitscore: r.scores!.fitscore,
    churn_risk: r.scores!.churn_risk,
    churn_probability: null,
  })
  const ordered = [...scored].sort((a, b) => (md5(a.id) < md5(b.id) ? -1 : 1)).map(point)

  const all = await aggregate(acme, { matrix: 'points' })
  assert.deepEqual(all.points, { scored: scored.length, sampled: false, items: ordered })

  const sample = await aggregate(acme, { matrix: 'points', points: 10 })
  assert.deepEqual(sample.points, {
    scored: scored.length,
    sampled: true,
    items: ordered.slice(0, 10),
  })
  assert.deepEqual(await aggregate(acme, { matrix: 'points', points: 10 }), sample)

  // A narrower search samples from its own matches, in the same order.
  const us = await aggregate(acme, {
    filters: [{ propertyName: 'country', operator: 'EQ', value: 'US' }],
    matrix: 'points',
    points: 5,
  })
  const usIds = new Set(active.filter((r) => r.country === 'US').map((r) => r.id))
  assert.deepEqual(us.points.items, ordered.filter((p) => usIds.has(p.id)).slice(0, 5))
})

test("an account sees only its own customers' figures", async () => {
  const mine = await aggregate(acme, { fields: ['arr'], matrix: 'points' })
  const theirs = await aggregate(other, { fields: ['arr'], matrix: 'points' })
  assert.equal(mine.count, rows.filter((r) => !r.churned).length)
  assert.equal(theirs.count, makeRows(80, 99).filter((r) => !r.churned).length)
  assert.ok(mine.points.items.every((p: { name: string }) => p.name.startsWith('Customer ')))
  assert.ok(theirs.points.items.every((p: { name: string }) => p.name.startsWith('Other ')))
  const [row] =
    await s.sql`select avg((attributes ->> 'arr')::numeric)::float8 as avg from customers
    where account_id = ${other.id} and not is_churned and attributes ? 'arr'`
  assert.ok(Math.abs(theirs.fields[0].avg - row.avg) < 1e-9 * row.avg)
})

test('bad input is a 400 naming each path, and limits are enforced', async () => {
  const bad = (body: unknown) => acme.api('/api/v1/customers/aggregate', body)
  assert.deepEqual(
    errorPaths(await bad({ fields: ['country', 'nope', 'upsell_score', 'has_sso'] })),
    ['/fields/0', '/fields/1', '/fields/3'],
  )
  const notNumber = await bad({ fields: ['name'] })
  assert.match(notNumber.body.errors[0].message, /name is a string field; only number fields/)
  // Condition and field problems in one answer.
  assert.deepEqual(
    errorPaths(
      await bad({
        filters: [{ propertyName: 'nope', operator: 'EQ', value: '1' }],
        fields: ['last_seen'],
      }),
    ),
    ['/fields/0', '/filters/0/propertyName'],
  )
  assert.deepEqual(errorPaths(await bad({ fields: new Array(11).fill('arr') })), ['/fields'])
  assert.deepEqual(errorPaths(await bad({ fields: ['arr'], buckets: 0 })), ['/buckets'])
  assert.deepEqual(errorPaths(await bad({ fields: ['arr'], buckets: 101 })), ['/buckets'])
  assert.deepEqual(errorPaths(await bad({ fields: ['arr'], buckets: 2.5 })), ['/buckets'])
  assert.deepEqual(errorPaths(await bad({ buckets: 5 })), ['/buckets'])
  assert.deepEqual(errorPaths(await bad({ matrix: 'scatter' })), ['/matrix'])
  assert.deepEqual(errorPaths(await bad({ matrix: 'points', points: 10_001 })), ['/points'])
  assert.deepEqual(errorPaths(await bad({ matrix: 'points', points: 0 })), ['/points'])
  assert.deepEqual(errorPaths(await bad({ matrix: 'grid', points: 10 })), ['/points'])
  assert.deepEqual(errorPaths(await bad({ field: ['arr'] })), ['/field'])
  assert.deepEqual(
    errorPaths(await bad({ filters: [], where: { propertyName: 'arr', operator: 'KNOWN' } })),
    ['/where'],
  )
  assert.deepEqual(errorPaths(await bad({ where: { and: [] } })), ['/where/and'])
  // The largest allowed values are answered.
  const max = await aggregate(acme, {
    fields: new Array(10).fill('arr'),
    buckets: 100,
    matrix: 'points',
    points: 10_000,
  })
  assert.equal(max.fields.length, 10)
  assert.equal(max.fields[9].histogram.length, 100)
})
