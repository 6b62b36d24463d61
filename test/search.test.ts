import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { startTestService, type Call, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { allPages, byteOrder, dayAgo, search, upload } from './helpers/search.ts'
import { storeScores } from './helpers/db.ts'

type Account = Awaited<ReturnType<TestService['account']>>

let s: TestService
let acme: Account
let other: Account
// service_id by external id, per account.
const ids: Record<string, Record<string, number>> = {}

const idsOf = (res: Call) => {
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.results.map((r: { id: string }) => r.id)
}
const customers = async (...filters: unknown[]) =>
  idsOf(await search(acme, 'customers', { filters }))
const contacts = async (...filters: unknown[]) => idsOf(await search(acme, 'contacts', { filters }))
const f = (propertyName: string, operator: string, value?: string | string[]) =>
  Array.isArray(value)
    ? { propertyName, operator, values: value }
    : { propertyName, operator, ...(value !== undefined && { value }) }

const errorsOf = (res: Call) => {
  assert.equal(res.status, 400, JSON.stringify(res.body))
  assert.equal(res.headers.get('content-type'), 'application/problem+json')
  return res.body.errors as { path: string; message: string }[]
}
const pathsOf = (res: Call) => errorsOf(res).map((e) => e.path)

const setTags = async (
  account: Account,
  entity: 'customers' | 'contacts',
  externalId: string,
  titles: string[],
) => {
  const res = await s.admin(
    'PUT',
    `/accounts/${account.id}/${entity}/${encodeURIComponent(externalId)}/tags`,
    {
      titles,
    },
  )
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}

const RECORD_COLUMNS = new Set(['is_churned', 'churned_date', 'churn_reason'])

const setScores = async (account: Account, externalId: string, values: Record<string, unknown>) => {
  const pick = (record: boolean) =>
    Object.fromEntries(Object.entries(values).filter(([k]) => RECORD_COLUMNS.has(k) === record))
  const churn = pick(true)
  if (Object.keys(churn).length)
    await s.sql`update customers set ${s.sql(churn)} where account_id = ${account.id}
      and external_id = ${externalId}`
  await storeScores(s.sql, 'customers', account.id, [{ external_id: externalId, ...pick(false) }])
}

// Active customers c-a..c-e and churned c-f, with contacts k-1..k-4 (k-3 belongs to the churned
// customer); `other` holds records with the same external ids, tags and property names.
const seed = async () => {
  acme = await scoredAccount(s)
  await s.admin('POST', `/accounts/${acme.id}/users`, { email: 'second@acme.test' })
  for (const title of ['VIP', 'Trial', 'Churn Risk'])
    await s.admin('POST', `/accounts/${acme.id}/tags`, { title })
  await upload(acme, 'customers', [
    {
      external_id: 'c-a',
      name: 'Alpha Corp',
      owner_email: 'owner@acme.test',
      attributes: { country: 'US', has_sso: true, plan_started: dayAgo(400) },
      metrics: [{ date: dayAgo(2), logins: 40, seats: 5 }],
    },
    {
      external_id: 'c-b',
      name: 'beta ltd',
      owner_email: 'Second@acme.test',
      attributes: { country: 'DE', has_sso: false, plan_started: dayAgo(30) },
      metrics: [
        { date: dayAgo(40), logins: 10, seats: 2 },
        { date: dayAgo(3), logins: 12 },
      ],
    },
    {
      external_id: 'c-c',
      name: 'Gamma 100%',
      attributes: { country: 'us' },
      metrics: [{ date: dayAgo(5), logins: 0 }],
    },
    {
      external_id: 'c-d',
      name: 'Delta_Co',
      owner_email: 'OWNER@ACME.TEST',
      attributes: { country: '', has_sso: true, plan_started: dayAgo(5) },
      metrics: [{ date: dayAgo(1), logins: 25.5 }],
    },
    { external_id: 'c-e', name: '' },
    {
      external_id: 'c-f',
      name: 'Zeta',
      owner_email: 'owner@acme.test',
      attributes: { country: 'US', has_sso: true, plan_started: dayAgo(400) },
      metrics: [{ date: dayAgo(2), logins: 40 }],
    },
  ])
  await upload(acme, 'contacts', [
    {
      customer_external_id: 'c-a',
      contact_external_id: 'k-1',
      contact_name: 'Ann',
      attributes: { role: 'admin' },
      metrics: [{ date: dayAgo(2), sessions: 10 }],
    },
    {
      customer_external_id: 'c-b',
      contact_external_id: 'k-2',
      contact_name: 'Bob',
      attributes: { role: 'user' },
      metrics: [{ date: dayAgo(50), sessions: 3 }],
    },
    { customer_external_id: 'c-f', contact_external_id: 'k-3', contact_name: 'Cy' },
    {
      customer_external_id: 'c-a',
      contact_external_id: 'k-4',
      contact_name: 'Dee',
      attributes: { role: 'Admin' },
    },
  ])
  // A value of another JSON type than its definition counts as no value; a future date is known
  // but never "less than N days ago".
  await s.sql`update customers set
    attributes = ${s.sql.json({ country: 7, plan_started: dayAgo(-10) })}
    where account_id = ${acme.id} and external_id = 'c-e'`
  await setScores(acme, 'c-a', {
    engagementscore: 80,
    engagementscore_difference: 5,
    fitscore: 50,
    churn_risk: 10,
    upsell_score: 77,
    last_seen: dayAgo(1),
    engagementscore_trend: s.sql.json({ [dayAgo(31)]: 75, [dayAgo(1)]: 80 }),
  })
  await setScores(acme, 'c-b', {
    engagementscore: 20,
    engagementscore_difference: -10,
    fitscore: -20,
    churn_risk: 60,
    last_seen: dayAgo(20),
  })
  await setScores(acme, 'c-c', {
    engagementscore: 0,
    engagementscore_difference: 0,
    fitscore: null,
    churn_risk: 50,
    last_seen: dayAgo(200),
  })
  await setScores(acme, 'c-d', {
    engagementscore: null,
    engagementscore_difference: null,
    fitscore: null,
    churn_risk: null,
    last_seen: null,
    engagementscore_trend: null,
  })
  await setScores(acme, 'c-e', {
    engagementscore: -30,
    engagementscore_difference: null,
    fitscore: 0,
    churn_risk: 90,
    last_seen: dayAgo(60),
  })
  await setScores(acme, 'c-f', {
    engagementscore: 80,
    fitscore: 50,
    churn_risk: 10,
    last_seen: dayAgo(1),
    is_churned: true,
    churned_date: dayAgo(1),
    churn_reason: 'manual',
  })
  await storeScores(s.sql, 'contacts', acme.id, [
    {
      external_id: 'k-1',
      engagementscore: 70,
      engagementscore_difference: null,
      last_seen: dayAgo(2),
      engagementscore_trend: s.sql.json({ [dayAgo(2)]: 70 }),
    },
    {
      external_id: 'k-2',
      engagementscore: 10,
      engagementscore_difference: null,
      last_seen: dayAgo(50),
      engagementscore_trend: null,
    },
  ])
  await setTags(acme, 'customers', 'c-a', ['VIP'])
  await setTags(acme, 'customers', 'c-b', ['vip', 'TRIAL'])
  await setTags(acme, 'customers', 'c-d', ['Trial'])
  await setTags(acme, 'customers', 'c-f', ['VIP'])
  await setTags(acme, 'contacts', 'k-1', ['VIP'])
  await setTags(acme, 'contacts', 'k-3', ['Trial'])

  other = await scoredAccount(s, 'Other')
  await s.admin('POST', `/accounts/${other.id}/tags`, { title: 'VIP' })
  await upload(other, 'customers', [
    {
      external_id: 'c-a',
      name: 'Alpha Corp',
      owner_email: 'owner@acme.test',
      attributes: { country: 'US', has_sso: true },
      metrics: [{ date: dayAgo(2), logins: 40 }],
    },
    { external_id: 'c-x', name: 'Other X', attributes: { country: 'DE' } },
  ])
  await upload(other, 'contacts', [
    {
      customer_external_id: 'c-a',
      contact_external_id: 'k-1',
      contact_name: 'Ann',
      attributes: { role: 'admin' },
    },
  ])
  await setTags(other, 'customers', 'c-a', ['VIP'])
  await setTags(other, 'customers', 'c-x', ['VIP'])

  for (const account of [acme, other]) {
    ids[account.id] = {}
    for (const r of await s.sql`
      select external_id, service_id from customers where account_id = ${account.id}
      union all select external_id, service_id from contacts where account_id = ${account.id}`) {
      ids[account.id][r.external_id] = r.service_id
    }
  }
}

before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
  await seed()
})
after(() => s?.stop())

const ACTIVE = ['c-a', 'c-b', 'c-c', 'c-d', 'c-e']

// [field, operator, operand, expected customers]: one row per operator of each property type
// on custom properties. Stored values:
//   logins (number metric): a 40, b 12 (latest of two snapshots), c 0, d 25.5, e none
//   plan_started (date attribute): a 400 days ago, b 30, c none, d 5, e 10 days ahead
//   country (string attribute): a 'US', b 'DE', c 'us', d '', e the number 7
//   has_sso (boolean attribute): a true, b false, c none, d true, e none
const operatorCases: Record<string, [string, string, string | string[] | undefined, string[]][]> = {
  number: [
    ['logins', 'EQ', '40', ['c-a']],
    ['logins', 'NEQ', '40', ['c-b', 'c-c', 'c-d', 'c-e']],
    ['logins', 'LT', '12', ['c-c']],
    ['logins', 'LTE', '12', ['c-b', 'c-c']],
    ['logins', 'GT', '25.5', ['c-a']],
    ['logins', 'GTE', '25.5', ['c-a', 'c-d']],
    ['logins', 'IN', ['0', '12'], ['c-b', 'c-c']],
    ['logins', 'NIN', ['0', '12'], ['c-a', 'c-d', 'c-e']],
    ['logins', 'KNOWN', undefined, ['c-a', 'c-b', 'c-c', 'c-d']],
    ['logins', 'UNKNOWN', undefined, ['c-e']],
  ],
  date: [
    ['plan_started', 'EQ', dayAgo(30), ['c-b']],
    ['plan_started', 'NEQ', dayAgo(30), ['c-a', 'c-c', 'c-d', 'c-e']],
    ['plan_started', 'LT', dayAgo(30), ['c-a']],
    ['plan_started', 'LTE', dayAgo(30), ['c-a', 'c-b']],
    ['plan_started', 'GT', dayAgo(30), ['c-d', 'c-e']],
    ['plan_started', 'GTE', dayAgo(30), ['c-b', 'c-d', 'c-e']],
    ['plan_started', 'IN', [dayAgo(400), dayAgo(5)], ['c-a', 'c-d']],
    ['plan_started', 'NIN', [dayAgo(400), dayAgo(5)], ['c-b', 'c-c', 'c-e']],
    ['plan_started', 'KNOWN', undefined, ['c-a', 'c-b', 'c-d', 'c-e']],
    ['plan_started', 'UNKNOWN', undefined, ['c-c']],
    ['plan_started', 'GTD', '10', ['c-a', 'c-b']],
    ['plan_started', 'LTD', '10', ['c-d']],
  ],
  string: [
    ['country', 'EQ', 'US', ['c-a']],
    ['country', 'NEQ', 'US', ['c-b', 'c-c', 'c-d', 'c-e']],
    ['country', 'LIKE', 'u', ['c-a', 'c-c']],
    ['country', 'NLIKE', 'u', ['c-b', 'c-d', 'c-e']],
    ['country', 'IN', ['US', 'DE'], ['c-a', 'c-b']],
    ['country', 'NIN', ['US', 'DE'], ['c-c', 'c-d', 'c-e']],
    ['country', 'KNOWN', undefined, ['c-a', 'c-b', 'c-c']],
    ['country', 'UNKNOWN', undefined, ['c-d', 'c-e']],
  ],
  boolean: [
    ['has_sso', 'EQ', 'true', ['c-a', 'c-d']],
    ['has_sso', 'NEQ', 'true', ['c-b', 'c-c', 'c-e']],
    ['has_sso', 'KNOWN', undefined, ['c-a', 'c-b', 'c-d']],
    ['has_sso', 'UNKNOWN', undefined, ['c-c', 'c-e']],
  ],
}

describe('every operator of every property type', () => {
  for (const [type, cases] of Object.entries(operatorCases)) {
    for (const [field, operator, operand, expected] of cases) {
      test(`${type} ${operator}`, async () => {
        assert.deepEqual(await customers(f(field, operator, operand)), expected)
        // The negation of each positive operator is its exact complement among active customers.
        const negation: Record<string, string> = {
          EQ: 'NEQ',
          IN: 'NIN',
          LIKE: 'NLIKE',
          KNOWN: 'UNKNOWN',
        }
        if (negation[operator]) {
          const complement = await customers(f(field, negation[operator], operand))
          assert.deepEqual([...expected, ...complement].sort(), ACTIVE)
        }
      })
    }
  }
})

describe('operator details', () => {
  test('numbers compare by value whatever their notation', async () => {
    for (const value of ['40', '40.0', '4e1', '40.000'])
      assert.deepEqual(await customers(f('logins', 'EQ', value)), ['c-a'])
    assert.deepEqual(await customers(f('logins', 'LT', '-1')), [])
    assert.deepEqual(
      await customers(f('logins', 'EQ', '12')),
      ['c-b'],
      'the latest snapshot gives the value',
    )
    assert.deepEqual(
      await customers(f('seats', 'EQ', '2')),
      ['c-b'],
      'a metric missing from the latest snapshot keeps its earlier value',
    )
  })

  test('boolean EQ false and NEQ false', async () => {
    assert.deepEqual(await customers(f('has_sso', 'EQ', 'false')), ['c-b'])
    assert.deepEqual(await customers(f('has_sso', 'NEQ', 'false')), ['c-a', 'c-c', 'c-d', 'c-e'])
  })

  test('LIKE is a case-insensitive literal substring: % and _ are plain characters', async () => {
    assert.deepEqual(await customers(f('name', 'LIKE', '100%')), ['c-c'])
    assert.deepEqual(await customers(f('name', 'LIKE', '%')), ['c-c'])
    assert.deepEqual(await customers(f('name', 'LIKE', '_')), ['c-d'])
    assert.deepEqual(await customers(f('name', 'LIKE', 'ALPHA')), ['c-a'])
    assert.deepEqual(
      await customers(f('name', 'NLIKE', 'a')),
      ['c-e'],
      'an empty name contains nothing',
    )
    assert.deepEqual(
      await customers(f('name', 'LIKE', '')),
      ACTIVE,
      'the empty string is in every string, even an empty one',
    )
    assert.deepEqual(
      await customers(f('country', 'LIKE', '')),
      ['c-a', 'c-b', 'c-c', 'c-d'],
      'but not in a value of another type',
    )
  })

  test('string EQ and IN are exact (case-sensitive); an empty string is not a known value', async () => {
    assert.deepEqual(await customers(f('country', 'EQ', 'us')), ['c-c'])
    assert.deepEqual(await customers(f('country', 'EQ', '')), ['c-d'])
    assert.deepEqual(await customers(f('name', 'KNOWN')), ['c-a', 'c-b', 'c-c', 'c-d'])
    assert.deepEqual(await customers(f('name', 'UNKNOWN')), ['c-e'])
    assert.deepEqual(await customers(f('name', 'IN', ['beta ltd', 'Zeta', 'BETA LTD'])), ['c-b'])
  })

  test('IN takes a single value when values is absent', async () => {
    assert.deepEqual(await customers({ propertyName: 'country', operator: 'IN', value: 'DE' }), [
      'c-b',
    ])
  })

  test('core score fields and last_seen', async () => {
    assert.deepEqual(await customers(f('engagementscore', 'GT', '0')), ['c-a', 'c-b'])
    assert.deepEqual(await customers(f('engagementscore', 'UNKNOWN')), ['c-d'])
    assert.deepEqual(await customers(f('fitscore', 'GTE', '0')), ['c-a', 'c-e'])
    assert.deepEqual(await customers(f('churn_risk', 'LT', '50')), ['c-a'])
    assert.deepEqual(await customers(f('churn_risk', 'IN', ['50', '90'])), ['c-c', 'c-e'])
    assert.deepEqual(await customers(f('engagementscore_difference', 'NEQ', '0')), [
      'c-a',
      'c-b',
      'c-d',
      'c-e',
    ])
    assert.deepEqual(await customers(f('last_seen', 'GTD', '30')), ['c-c', 'c-e'])
    assert.deepEqual(await customers(f('last_seen', 'LTD', '30')), ['c-a', 'c-b'])
    assert.deepEqual(await customers(f('last_seen', 'GTE', dayAgo(20))), ['c-a', 'c-b'])
    assert.deepEqual(await customers(f('last_seen', 'GTD', '0')), ['c-a', 'c-b', 'c-c', 'c-e'])
  })

  test('filters combine with AND', async () => {
    assert.deepEqual(
      await customers(
        f('country', 'IN', ['US', 'DE', 'us']),
        f('logins', 'GT', '5'),
        f('tags', 'EQ', 'trial'),
      ),
      ['c-b'],
    )
    assert.deepEqual(await customers(f('country', 'EQ', 'US'), f('country', 'EQ', 'DE')), [])
  })
})

describe('owner, tags, is_churned and customer_external_id', () => {
  test('owner: by email, case-insensitive; KNOWN/UNKNOWN; unknown emails', async () => {
    assert.deepEqual(await customers(f('owner', 'EQ', 'OWNER@acme.test')), ['c-a', 'c-d'])
    assert.deepEqual(await customers(f('owner', 'NEQ', 'owner@ACME.test')), ['c-b', 'c-c', 'c-e'])
    assert.deepEqual(await customers(f('owner', 'IN', ['second@ACME.test', 'nobody@acme.test'])), [
      'c-b',
    ])
    assert.deepEqual(await customers(f('owner', 'NIN', ['owner@acme.test', 'SECOND@acme.test'])), [
      'c-c',
      'c-e',
    ])
    assert.deepEqual(await customers(f('owner', 'KNOWN')), ['c-a', 'c-b', 'c-d'])
    assert.deepEqual(await customers(f('owner', 'UNKNOWN')), ['c-c', 'c-e'])
    assert.deepEqual(await customers(f('owner', 'EQ', 'nobody@acme.test')), [])
    assert.deepEqual(await customers(f('owner', 'IN', ['nobody@acme.test'])), [])
    assert.deepEqual(await customers(f('owner', 'NEQ', 'nobody@acme.test')), ACTIVE)
    assert.deepEqual(await customers(f('owner', 'NIN', ['nobody@acme.test'])), ACTIVE)
    assert.deepEqual(
      pathsOf(await search(acme, 'customers', { filters: [f('owner', 'LIKE', 'acme')] })),
      ['/filters/0/operator'],
    )
  })

  test('tags: by title, case-insensitive, any-of; KNOWN/UNKNOWN; unknown titles', async () => {
    assert.deepEqual(await customers(f('tags', 'EQ', 'vip')), ['c-a', 'c-b'])
    assert.deepEqual(await customers(f('tags', 'IN', ['TRIAL', 'nope'])), ['c-b', 'c-d'])
    assert.deepEqual(await customers(f('tags', 'IN', ['vip', 'trial'])), ['c-a', 'c-b', 'c-d'])
    assert.deepEqual(await customers(f('tags', 'NEQ', 'Vip')), ['c-c', 'c-d', 'c-e'])
    assert.deepEqual(await customers(f('tags', 'NIN', ['vip', 'trial'])), ['c-c', 'c-e'])
    assert.deepEqual(await customers(f('tags', 'KNOWN')), ['c-a', 'c-b', 'c-d'])
    assert.deepEqual(await customers(f('tags', 'UNKNOWN')), ['c-c', 'c-e'])
    assert.deepEqual(await customers(f('tags', 'EQ', 'Churn Risk')), [], 'a tag nobody has')
    assert.deepEqual(await customers(f('tags', 'EQ', 'nope')), [])
    assert.deepEqual(await customers(f('tags', 'NEQ', 'nope')), ACTIVE)
    assert.deepEqual(await customers(f('tags', 'NIN', ['nope'])), ACTIVE)
    assert.deepEqual(
      pathsOf(await search(acme, 'customers', { filters: [f('tags', 'LIKE', 'v')] })),
      ['/filters/0/operator'],
    )
  })

  test('is_churned: active only by default; the filter chooses', async () => {
    assert.deepEqual(idsOf(await search(acme, 'customers')), ACTIVE)
    assert.deepEqual(idsOf(await search(acme, 'customers', {})), ACTIVE)
    assert.deepEqual(await customers(), ACTIVE)
    assert.deepEqual(await customers(f('is_churned', 'EQ', 'true')), ['c-f'])
    assert.deepEqual(await customers(f('is_churned', 'EQ', 'false')), ACTIVE)
    assert.deepEqual(await customers(f('is_churned', 'NEQ', 'true')), ACTIVE)
    assert.deepEqual(await customers(f('is_churned', 'NEQ', 'false')), ['c-f'])
    assert.deepEqual(await customers(f('is_churned', 'KNOWN')), [...ACTIVE, 'c-f'])
    assert.deepEqual(await customers(f('is_churned', 'UNKNOWN')), [])
    assert.deepEqual(await customers(f('tags', 'EQ', 'VIP'), f('is_churned', 'EQ', 'true')), [
      'c-f',
    ])
    assert.deepEqual(
      await customers(f('tags', 'EQ', 'VIP')),
      ['c-a', 'c-b'],
      'the churned VIP stays out by default',
    )
  })

  test('contacts: all of them, including contacts of churned customers', async () => {
    assert.deepEqual(await contacts(), ['k-1', 'k-2', 'k-3', 'k-4'])
    assert.deepEqual(idsOf(await search(acme, 'contacts')), ['k-1', 'k-2', 'k-3', 'k-4'])
  })

  test('customer_external_id: exact and case-sensitive; unknown ids', async () => {
    assert.deepEqual(await contacts(f('customer_external_id', 'EQ', 'c-a')), ['k-1', 'k-4'])
    assert.deepEqual(await contacts(f('customer_external_id', 'EQ', 'C-A')), [])
    assert.deepEqual(await contacts(f('customer_external_id', 'EQ', 'c-')), [])
    assert.deepEqual(await contacts(f('customer_external_id', 'NEQ', 'c-a')), ['k-2', 'k-3'])
    assert.deepEqual(await contacts(f('customer_external_id', 'IN', ['c-b', 'c-f', 'nope'])), [
      'k-2',
      'k-3',
    ])
    assert.deepEqual(await contacts(f('customer_external_id', 'NIN', ['c-a', 'c-b'])), ['k-3'])
    assert.deepEqual(await contacts(f('customer_external_id', 'IN', ['nope'])), [])
    assert.deepEqual(await contacts(f('customer_external_id', 'NEQ', 'nope')), [
      'k-1',
      'k-2',
      'k-3',
      'k-4',
    ])
    for (const operator of ['KNOWN', 'UNKNOWN', 'LIKE']) {
      assert.deepEqual(
        pathsOf(
          await search(acme, 'contacts', { filters: [f('customer_external_id', operator, 'c')] }),
        ),
        ['/filters/0/operator'],
      )
    }
  })

  test('contact fields: tags, custom properties, scores', async () => {
    assert.deepEqual(await contacts(f('tags', 'EQ', 'vip')), ['k-1'])
    assert.deepEqual(await contacts(f('tags', 'NIN', ['VIP'])), ['k-2', 'k-3', 'k-4'])
    assert.deepEqual(await contacts(f('tags', 'KNOWN')), ['k-1', 'k-3'])
    assert.deepEqual(await contacts(f('tags', 'UNKNOWN')), ['k-2', 'k-4'])
    assert.deepEqual(await contacts(f('tags', 'IN', ['nope'])), [])
    assert.deepEqual(await contacts(f('role', 'EQ', 'admin')), ['k-1'])
    assert.deepEqual(await contacts(f('role', 'LIKE', 'ADMIN')), ['k-1', 'k-4'])
    assert.deepEqual(await contacts(f('role', 'UNKNOWN')), ['k-3'])
    assert.deepEqual(await contacts(f('sessions', 'GT', '5')), ['k-1'])
    assert.deepEqual(await contacts(f('name', 'IN', ['Bob', 'Cy'])), ['k-2', 'k-3'])
    assert.deepEqual(await contacts(f('engagementscore', 'GTE', '50')), ['k-1'])
    assert.deepEqual(await contacts(f('engagementscore_difference', 'UNKNOWN')), [
      'k-1',
      'k-2',
      'k-3',
      'k-4',
    ])
    assert.deepEqual(await contacts(f('last_seen', 'GTD', '30')), ['k-2'])
    assert.deepEqual(await contacts(f('last_seen', 'LTD', '30')), ['k-1'])
  })
})

describe('where trees', () => {
  const where = async (entity: 'customers' | 'contacts', tree: unknown) =>
    idsOf(await search(acme, entity, { where: tree }))
  const us = f('country', 'EQ', 'US')
  const few = f('logins', 'LT', '12')

  test('or, and and not over the filters of the interface', async () => {
    assert.deepEqual(await where('customers', { or: [us, few] }), ['c-a', 'c-c'])
    assert.deepEqual(await where('customers', { not: { or: [us, few] } }), ['c-b', 'c-d', 'c-e'])
    assert.deepEqual(
      await where('customers', { and: [{ or: [us, few] }, { not: f('logins', 'EQ', '0') }] }),
      ['c-a'],
    )
    // A leaf without a value (c-e has no logins) is false, so its NOT is true, as with NEQ.
    assert.deepEqual(await where('customers', { not: f('logins', 'GT', '1') }), ['c-c', 'c-e'])
    // Owner and tag operands are looked up wherever they are in the tree.
    const owned = {
      or: [
        f('owner', 'EQ', 'SECOND@acme.test'),
        { and: [f('tags', 'EQ', 'trial'), f('owner', 'KNOWN')] },
      ],
    }
    assert.deepEqual(await where('customers', owned), ['c-b', 'c-d'])
  })

  test('the filters of the interface under an AND node answer exactly as the filters', async () => {
    const filters = [
      f('country', 'IN', ['US', 'DE', 'us']),
      f('logins', 'GT', '5'),
      f('tags', 'EQ', 'trial'),
    ]
    const plain = await search(acme, 'customers', { filters, properties: ['country'] })
    assert.deepEqual(idsOf(plain), ['c-b'])
    assert.deepEqual(
      (await search(acme, 'customers', { where: { and: filters }, properties: ['country'] })).body,
      plain.body,
    )
  })

  test('the churn default: off when a leaf anywhere in the tree names is_churned', async () => {
    assert.deepEqual(await where('customers', us), ['c-a'])
    assert.deepEqual(await where('customers', { or: [us, f('is_churned', 'EQ', 'true')] }), [
      'c-a',
      'c-f',
    ])
    // Then the tree alone decides: is_churned named under NOT, where it excludes no one.
    assert.deepEqual(await where('customers', { and: [us, { not: f('is_churned', 'UNKNOWN') }] }), [
      'c-a',
      'c-f',
    ])
  })

  test('contacts take the same trees', async () => {
    const tree = { or: [f('customer_external_id', 'EQ', 'c-f'), f('role', 'EQ', 'admin')] }
    assert.deepEqual(await where('contacts', tree), ['k-1', 'k-3'])
    assert.deepEqual(
      await where('contacts', { not: { or: [f('tags', 'KNOWN'), f('role', 'LIKE', 'admin')] } }),
      ['k-2'],
    )
  })

  test('the limits are inclusive: 4 nested nodes, 50 filters', async () => {
    assert.deepEqual(await where('customers', nested(4)), ACTIVE)
    const fifty = { or: [{ and: Array(25).fill(few) }, { not: { or: Array(25).fill(us) } }] }
    assert.deepEqual(await where('customers', fifty), ['c-b', 'c-c', 'c-d', 'c-e'])
  })
})

// Nodes nested n deep, each an OR of a filter matching every record and the next node.
const nested = (n: number): unknown =>
  n === 0 ? f('name', 'UNKNOWN') : { or: [f('name', 'KNOWN'), nested(n - 1)] }

describe('counts', () => {
  test('exact: the number of matching records, on every page, paging aside', async () => {
    const body = {
      where: { or: [f('country', 'KNOWN'), f('logins', 'GT', '1')] },
      count: 'exact',
      limit: 2,
    }
    const pages = await allPages(acme, 'customers', body)
    const all = pages.flatMap((p) => p.results.map((r: { id: string }) => r.id))
    assert.deepEqual(all, ['c-a', 'c-b', 'c-c', 'c-d'])
    for (const page of pages) assert.equal(page.total, all.length)
    assert.deepEqual(Object.keys(pages[0]), ['results', 'paging', 'total'])
    assert.equal((await search(acme, 'customers', { count: 'exact' })).body.total, ACTIVE.length)
    assert.equal(
      (await search(acme, 'contacts', { filters: [f('role', 'KNOWN')], count: 'exact' })).body
        .total,
      3,
    )
    const none = await search(acme, 'customers', {
      filters: [f('name', 'EQ', 'nobody')],
      count: 'exact',
    })
    assert.deepEqual(none.body, { results: [], total: 0 })
  })

  test("estimate: the planner's estimate, flagged as one", async () => {
    const res = await search(acme, 'customers', {
      where: { not: f('tags', 'KNOWN') },
      count: 'estimate',
      limit: 1,
    })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    assert.deepEqual(Object.keys(res.body), ['results', 'paging', 'total', 'total_is_estimate'])
    assert.ok(Number.isInteger(res.body.total) && res.body.total >= 0, String(res.body.total))
    assert.equal(res.body.total_is_estimate, true)
  })

  test('without count, no total', async () => {
    assert.deepEqual(Object.keys((await search(acme, 'customers', { limit: 1 })).body), [
      'results',
      'paging',
    ])
  })
})

describe('the response objects', () => {
  const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

  test('customer: every field of the interface spec, in its order, with its type', async () => {
    const res = await search(acme, 'customers', { filters: [f('is_churned', 'KNOWN')] })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'application/json')
    assert.deepEqual(Object.keys(res.body), ['results'])
    const byId = Object.fromEntries(res.body.results.map((r: any) => [r.id, r]))
    const [row] =
      await s.sql`select created_at, updated_at from customers where account_id = ${acme.id}
        and external_id = 'c-a'`
    const a = byId['c-a']
    assert.deepEqual(Object.keys(a), [
      'id',
      'service_id',
      'name',
      'fitscore',
      'engagementscore',
      'churn_risk',
      'upsell_score',
      'churn_probability',
      'is_churned',
      'last_seen',
      'engagementscore_difference',
      'engagementscore_trend',
      'owner',
      'tags',
      'properties',
      'createdAt',
      'updatedAt',
    ])
    assert.deepEqual(a, {
      id: 'c-a',
      service_id: ids[acme.id]['c-a'],
      name: 'Alpha Corp',
      fitscore: 50,
      engagementscore: 80,
      churn_risk: 10,
      upsell_score: 77,
      churn_probability: null,
      is_churned: false,
      last_seen: dayAgo(1),
      engagementscore_difference: 5,
      engagementscore_trend: { [dayAgo(31)]: 75, [dayAgo(1)]: 80 },
      owner: 'owner@acme.test',
      tags: ['VIP'],
      properties: { country: 'US', has_sso: true, plan_started: dayAgo(400), logins: 40, seats: 5 },
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    })
    assert.equal(typeof a.service_id, 'number')
    assert.match(a.createdAt, iso)
    assert.match(a.updatedAt, iso)
    // Nulls where nullable; the owner's stored email, not the uploaded spelling; tags sorted.
    const d = byId['c-d']
    for (const field of [
      'fitscore',
      'engagementscore',
      'churn_risk',
      'last_seen',
      'engagementscore_difference',
      'engagementscore_trend',
    ]) {
      assert.equal(d[field], null, field)
    }
    assert.equal(d.owner, 'owner@acme.test')
    assert.deepEqual(byId['c-b'].tags, ['Trial', 'VIP'])
    assert.equal(byId['c-b'].owner, 'second@acme.test')
    assert.deepEqual(byId['c-b'].properties, {
      country: 'DE',
      has_sso: false,
      plan_started: dayAgo(30),
      logins: 12,
      seats: 2,
    })
    assert.equal(byId['c-c'].owner, null)
    assert.deepEqual(byId['c-c'].tags, [])
    assert.equal(byId['c-e'].name, '')
    assert.deepEqual(byId['c-e'].properties, { country: 7, plan_started: dayAgo(-10) })
    assert.equal(byId['c-f'].is_churned, true)
  })

  test('contact: every field of the interface spec, in its order, with its type', async () => {
    const res = await search(acme, 'contacts', { filters: [f('name', 'IN', ['Ann', 'Cy'])] })
    const [k1, k3] = res.body.results
    assert.deepEqual(Object.keys(k1), [
      'id',
      'service_id',
      'name',
      'engagementscore',
      'engagementscore_difference',
      'engagementscore_trend',
      'last_seen',
      'tags',
      'customer_external_id',
      'customer_service_id',
      'properties',
      'createdAt',
      'updatedAt',
    ])
    const [row] =
      await s.sql`select created_at, updated_at from contacts where account_id = ${acme.id}
        and external_id = 'k-1'`
    assert.deepEqual(k1, {
      id: 'k-1',
      service_id: ids[acme.id]['k-1'],
      name: 'Ann',
      engagementscore: 70,
      engagementscore_difference: null,
      engagementscore_trend: { [dayAgo(2)]: 70 },
      last_seen: dayAgo(2),
      tags: ['VIP'],
      customer_external_id: 'c-a',
      customer_service_id: ids[acme.id]['c-a'],
      properties: { role: 'admin', sessions: 10 },
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    })
    assert.equal(typeof k1.customer_service_id, 'number')
    assert.equal(k3.customer_external_id, 'c-f')
    assert.deepEqual(k3.properties, {})
    assert.deepEqual(k3.tags, ['Trial'])
  })

  test('properties selects codenames; core fields always come', async () => {
    const [a] = (
      await search(acme, 'customers', { properties: ['logins', 'country', 'logins'], limit: 1 })
    ).body.results
    assert.deepEqual(a.properties, { country: 'US', logins: 40 })
    assert.equal(a.owner, 'owner@acme.test')
    const [c] = (
      await search(acme, 'customers', {
        properties: ['has_sso'],
        filters: [f('name', 'EQ', 'Gamma 100%')],
      })
    ).body.results
    assert.deepEqual(c.properties, {}, 'a selected codename without a value is left out')
    assert.deepEqual(
      (await search(acme, 'customers', { properties: [], limit: 1 })).body.results[0].properties,
      {},
    )
    assert.deepEqual(
      (await search(acme, 'customers', { properties: ['crm_link'], limit: 1 })).body.results[0]
        .properties,
      {},
      'system attributes are known',
    )
    assert.deepEqual(
      (await search(acme, 'contacts', { properties: ['sessions'], limit: 1 })).body.results[0]
        .properties,
      { sessions: 10 },
    )
  })
})

describe('paging', () => {
  // External ids that sort differently in byte order than in most collations.
  const weird = [
    'a',
    'B',
    'b',
    'Z',
    'é',
    'e',
    '10',
    '9',
    'a/b',
    'a b',
    '%41',
    'ü',
    '日本',
    '😀',
    'A',
    'aa',
    'a-',
    'a_',
    '~',
    '!',
    'zz',
    'Ω',
    '0',
  ]
  let pager: Account

  before(async () => {
    pager = await scoredAccount(s, 'Pager')
    await upload(
      pager,
      'customers',
      weird.map((id, i) => ({
        external_id: id,
        name: `n${i}`,
        metrics: [{ date: dayAgo(1), logins: i }],
      })),
    )
  })

  test('pages through every record exactly once, in byte order, with paging only while more exist', async () => {
    const expected = [...weird].sort(byteOrder)
    for (const limit of [1, 5, 22, 23, 100]) {
      const pages = await allPages(pager, 'customers', { limit })
      assert.deepEqual(
        pages.flatMap((p) => p.results.map((r: { id: string }) => r.id)),
        expected,
        `limit ${limit}`,
      )
      assert.equal(pages.length, Math.ceil(weird.length / limit), `limit ${limit}`)
      for (const page of pages.slice(0, -1)) {
        assert.equal(page.results.length, limit)
        assert.deepEqual(Object.keys(page), ['results', 'paging'])
        assert.equal(page.paging.next.after, page.results[limit - 1].service_id)
      }
      assert.deepEqual(Object.keys(pages[pages.length - 1]), ['results'])
    }
  })

  test('paging with filters and property selection keeps them on every page', async () => {
    const body = {
      filters: [f('logins', 'GTE', '3'), f('name', 'NLIKE', '1')],
      properties: ['logins'],
      limit: 4,
    }
    const expected = weird
      .map((id, i) => ({ id, i }))
      .filter(({ i }) => i >= 3 && !`n${i}`.includes('1'))
      .map(({ id }) => id)
      .sort(byteOrder)
    const pages = await allPages(pager, 'customers', body)
    const results = pages.flatMap((p) => p.results)
    assert.deepEqual(
      results.map((r: { id: string }) => r.id),
      expected,
    )
    assert.ok(
      results.every((r: { properties: object }) => Object.keys(r.properties).join() === 'logins'),
    )
  })

  test('after the last record: an empty page, no paging', async () => {
    const last = [...weird].sort(byteOrder).at(-1)!
    const [row] = await s.sql`select service_id from customers where account_id = ${pager.id}
        and external_id = ${last}`
    const res = await search(pager, 'customers', { after: row.service_id })
    assert.equal(res.status, 200)
    assert.deepEqual(res.body, { results: [] })
  })

  test('after continues past a record outside the result set, such as a churned one', async () => {
    const expected = [...weird].sort(byteOrder)
    const [row] = await s.sql`update customers set is_churned = true where account_id = ${pager.id}
        and external_id = 'a/b'
        returning service_id`
    try {
      const res = await search(pager, 'customers', { after: row.service_id })
      assert.deepEqual(idsOf(res), expected.slice(expected.indexOf('a/b') + 1))
    } finally {
      await s.sql`update customers set is_churned = false where account_id = ${pager.id}
        and external_id = 'a/b'`
    }
  })
})

// The indexed sort keys page as the rest of the cursor's tie, then the records beyond its value,
// then those without one: long ties at the cursor (most records share a score, a name, a creation
// time), records without a score row beside ones whose row has no value, both directions.
describe('paging under a sort: ties and nulls', () => {
  let tied: Account
  // External IDs out of byte order against their insertion, so that a tie is not in
  // insertion order.
  const ids = Array.from(
    { length: 41 },
    (_, i) => `t${((i * 17) % 41).toString(36)}${i % 3 === 0 ? 'Z' : 'a'}`,
  )

  before(async () => {
    tied = await scoredAccount(s, 'Ties')
    // One upload: the records share their creation time.
    await upload(
      tied,
      'customers',
      ids.map((id, i) => ({ external_id: id, name: i % 2 ? 'Same' : `N${i % 5}` })),
    )
    // A record without a name (the column allows it; an upload always names one).
    await s.sql`update customers set name = null
      where account_id = ${tied.id} and external_id = any(${ids.filter((_, i) => i % 7 === 0)})`
    // Most share a score; some have a score row without one, some no row at all.
    await storeScores(
      s.sql,
      'customers',
      tied.id,
      ids.flatMap((id, i) =>
        i % 9 === 0
          ? []
          : [
              {
                external_id: id,
                engagementscore: i % 6 === 0 ? null : i % 4 ? 50 : i,
                fitscore: 3,
              },
            ],
      ),
    )
    // An hour after that shared time, computed apart: Citus refuses a STABLE function of a column
    // (timestamptz + interval) in an UPDATE.
    const [{ later }] = await s.sql`select (min(created_at) + interval '1 hour')::text as later
      from customers where account_id = ${tied.id}`
    await s.sql`update customers set created_at = ${later}::timestamptz
      where account_id = ${tied.id} and external_id = any(${ids.filter((_, i) => i % 5 === 0)})`
  })

  for (const [propertyName, valueSql] of [
    ['engagementscore', 'h.engagementscore::numeric'],
    ['fitscore', 'h.fitscore::numeric'],
    ['name', 'null::numeric'],
    ['createdAt', 'extract(epoch from r.created_at)'],
  ] as const) {
    for (const direction of ['asc', 'desc'] as const) {
      test(`${propertyName} ${direction}: each record once, in order, nulls last, external IDs ascending`, async () => {
        const rows = await s.sql`
          select r.external_id, r.name, ${s.sql.unsafe(valueSql)} as v from customers r
            left join customer_scores h on h.account_id = r.account_id
              and h.customer_id = r.service_id
          where r.account_id = ${tied.id}`
        const value = (r: (typeof rows)[number]) =>
          propertyName === 'name' ? r.name : r.v === null ? null : Number(r.v)
        const sign = direction === 'desc' ? -1 : 1
        const expected = [...rows]
          .sort((a, b) => {
            const [x, y] = [value(a), value(b)]
            if (x === null || y === null)
              return x === y ? byteOrder(a.external_id, b.external_id) : x === null ? 1 : -1
            const c = typeof x === 'string' ? byteOrder(x, y as string) : x - (y as number)
            return c !== 0 ? sign * c : byteOrder(a.external_id, b.external_id)
          })
          .map((r) => r.external_id)
        for (const limit of [1, 4, 15]) {
          const pages = await allPages(tied, 'customers', {
            sort: [{ propertyName, direction }],
            limit,
          })
          assert.deepEqual(
            pages.flatMap((p) => p.results.map((r: { id: string }) => r.id)),
            expected,
            `limit ${limit}`,
          )
        }
      })
    }
  }
})

describe('tenant isolation', () => {
  test("another account's records never appear", async () => {
    assert.deepEqual(await customers(), ACTIVE)
    assert.deepEqual(await customers(f('tags', 'EQ', 'VIP')), ['c-a', 'c-b'])
    assert.deepEqual(await customers(f('name', 'EQ', 'Other X')), [])
    const mine = (await search(acme, 'customers')).body.results.map(
      (r: { service_id: number }) => r.service_id,
    )
    assert.ok(!mine.includes(ids[other.id]['c-a']))
    const otherCustomers = await search(other, 'customers')
    assert.deepEqual(idsOf(otherCustomers), ['c-a', 'c-x'])
    assert.deepEqual(
      otherCustomers.body.results.map((r: { service_id: number }) => r.service_id),
      [ids[other.id]['c-a'], ids[other.id]['c-x']],
    )
    // second@acme.test is a user of acme only.
    assert.deepEqual(
      idsOf(await search(other, 'customers', { filters: [f('owner', 'EQ', 'second@acme.test')] })),
      [],
    )
    assert.deepEqual(
      idsOf(await search(other, 'customers', { filters: [f('owner', 'NEQ', 'second@acme.test')] })),
      ['c-a', 'c-x'],
    )
    assert.deepEqual(idsOf(await search(other, 'contacts')), ['k-1'])
    assert.equal((await search(other, 'contacts')).body.results[0].service_id, ids[other.id]['k-1'])
    assert.deepEqual(await contacts(f('customer_external_id', 'EQ', 'c-a')), ['k-1', 'k-4'])
  })

  test("another account's service_id as after is a 400", async () => {
    for (const [account, owner] of [
      [acme, other],
      [other, acme],
    ] as const) {
      const res = await search(account, 'customers', { after: ids[owner.id]['c-a'] })
      assert.deepEqual(pathsOf(res), ['/after'])
      assert.deepEqual(
        pathsOf(await search(account, 'contacts', { after: ids[owner.id]['k-1'] })),
        ['/after'],
      )
    }
  })
})

describe('400s, each with the path of the fault', () => {
  const cases: [string, 'customers' | 'contacts', unknown, string[]][] = [
    [
      'unknown propertyName',
      'customers',
      { filters: [f('nope', 'EQ', 'x')] },
      ['/filters/0/propertyName'],
    ],
    [
      'a customer property on contacts',
      'contacts',
      { filters: [f('country', 'EQ', 'US')] },
      ['/filters/0/propertyName'],
    ],
    [
      'unknown operator',
      'customers',
      { filters: [f('logins', 'BETWEEN', '1')] },
      ['/filters/0/operator'],
    ],
    [
      'lower-case operator',
      'customers',
      { filters: [f('logins', 'eq', '1')] },
      ['/filters/0/operator'],
    ],
    [
      'LIKE on a number',
      'customers',
      { filters: [f('logins', 'LIKE', '1')] },
      ['/filters/0/operator'],
    ],
    [
      'GTD on a number',
      'customers',
      { filters: [f('fitscore', 'GTD', '1')] },
      ['/filters/0/operator'],
    ],
    [
      'GT on a string',
      'customers',
      { filters: [f('country', 'GT', 'a')] },
      ['/filters/0/operator'],
    ],
    [
      'LT on a boolean',
      'customers',
      { filters: [f('has_sso', 'LT', 'true')] },
      ['/filters/0/operator'],
    ],
    [
      'IN on a boolean',
      'customers',
      { filters: [f('is_churned', 'IN', ['true'])] },
      ['/filters/0/operator'],
    ],
    ['LTD on a string', 'contacts', { filters: [f('role', 'LTD', '1')] }, ['/filters/0/operator']],
    ['missing value', 'customers', { filters: [f('logins', 'EQ')] }, ['/filters/0/value']],
    ['missing values', 'customers', { filters: [f('logins', 'NIN')] }, ['/filters/0/values']],
    ['empty values', 'customers', { filters: [f('logins', 'IN', [])] }, ['/filters/0/values']],
    ['missing days', 'customers', { filters: [f('last_seen', 'GTD')] }, ['/filters/0/value']],
    ['not a number', 'customers', { filters: [f('logins', 'GT', 'ten')] }, ['/filters/0/value']],
    [
      'not a number in a list',
      'customers',
      { filters: [f('churn_risk', 'IN', ['1', '1x'])] },
      ['/filters/0/values/1'],
    ],
    [
      'not a date',
      'customers',
      { filters: [f('plan_started', 'LT', '2026-02-30')] },
      ['/filters/0/value'],
    ],
    ['not a boolean', 'customers', { filters: [f('has_sso', 'EQ', 'yes')] }, ['/filters/0/value']],
    [
      'negative days',
      'customers',
      { filters: [f('last_seen', 'GTD', '-1')] },
      ['/filters/0/value'],
    ],
    [
      'fractional days',
      'contacts',
      { filters: [f('last_seen', 'LTD', '1.5')] },
      ['/filters/0/value'],
    ],
    [
      'a NUL in an owner email',
      'customers',
      { filters: [f('owner', 'IN', ['a@x.io', 'b\u0000@x.io'])] },
      ['/filters/0/values/1'],
    ],
    [
      'a NUL in a tag title',
      'contacts',
      { filters: [f('tags', 'EQ', '\u0000')] },
      ['/filters/0/value'],
    ],
    [
      'an unpaired surrogate in a value',
      'customers',
      { filters: [f('name', 'EQ', 'a\ud800')] },
      ['/filters/0/value'],
    ],
    [
      'an unpaired surrogate in an owner email',
      'customers',
      { filters: [f('owner', 'IN', ['a@x.io', '\udc00@x.io'])] },
      ['/filters/0/values/1'],
    ],
    [
      'a value that is not a string',
      'customers',
      { filters: [{ propertyName: 'logins', operator: 'EQ', value: 5 }] },
      ['/filters/0/value'],
    ],
    [
      'a filter without propertyName and operator',
      'customers',
      { filters: [{ value: 'x' }] },
      ['/filters/0/propertyName', '/filters/0/operator'],
    ],
    ['filters not an array', 'customers', { filters: { propertyName: 'name' } }, ['/filters']],
    [
      'more than 10 filters',
      'customers',
      { filters: Array.from({ length: 11 }, () => f('name', 'KNOWN')) },
      ['/filters'],
    ],
    ['limit 0', 'customers', { limit: 0 }, ['/limit']],
    ['limit 1001', 'contacts', { limit: 1001 }, ['/limit']],
    ['fractional limit', 'customers', { limit: 2.5 }, ['/limit']],
    ['limit as a string', 'customers', { limit: '10' }, ['/limit']],
    [
      'unknown properties codename',
      'customers',
      { properties: ['logins', 'nope'] },
      ['/properties/1'],
    ],
    [
      'a customer codename in contact properties',
      'contacts',
      { properties: ['country'] },
      ['/properties/0'],
    ],
    ['after of no record', 'customers', { after: 987654321 }, ['/after']],
    ['after not an integer', 'customers', { after: 1.5 }, ['/after']],
    ['after as a string', 'customers', { after: '1' }, ['/after']],
    ['after beyond safe integers', 'contacts', { after: 1e300 }, ['/after']],
    [
      'a tree deeper than 4 nodes',
      'customers',
      { where: nested(5) },
      ['/where/or/1/or/1/or/1/or/1'],
    ],
    [
      'more than 50 filters in a tree',
      'customers',
      { where: { or: Array(51).fill(f('name', 'KNOWN')) } },
      ['/where'],
    ],
    [
      'filters and where together',
      'customers',
      { filters: [], where: f('name', 'KNOWN') },
      ['/where'],
    ],
    [
      'an unknown key in a tree node',
      'customers',
      { where: { or: [f('name', 'KNOWN'), { adn: [f('name', 'KNOWN')] }] } },
      ['/where/or/1/and', '/where/or/1/adn'],
    ],
    ['an empty node', 'contacts', { where: { not: { or: [] } } }, ['/where/not/or']],
    [
      'a customer-only field inside a contact tree',
      'contacts',
      { where: { or: [f('role', 'KNOWN'), { and: [f('owner', 'KNOWN')] }] } },
      ['/where/or/1/and/0/propertyName'],
    ],
    [
      'an operator not allowed inside a tree',
      'customers',
      { where: { or: [f('name', 'KNOWN'), { and: [f('logins', 'LIKE', '1')] }] } },
      ['/where/or/1/and/0/operator'],
    ],
    ['count of an unknown kind', 'customers', { count: 'all' }, ['/count']],
    [
      'sort on a contact-only field',
      'customers',
      { sort: [{ propertyName: 'customer_external_id' }] },
      ['/sort/0/propertyName'],
    ],
    [
      'sort on a customer-only field',
      'contacts',
      { sort: [{ propertyName: 'fitscore' }] },
      ['/sort/0/propertyName'],
    ],
    [
      'sort on an unknown field',
      'customers',
      { sort: [{ propertyName: 'nope' }] },
      ['/sort/0/propertyName'],
    ],
    [
      'sort on tags',
      'contacts',
      { sort: [{ propertyName: 'name' }, { propertyName: 'tags' }] },
      ['/sort/1/propertyName'],
    ],
    [
      'more than 3 sort keys',
      'customers',
      { sort: Array(4).fill({ propertyName: 'name' }) },
      ['/sort'],
    ],
    [
      'a bad sort direction',
      'customers',
      { sort: [{ propertyName: 'name', direction: 'up' }] },
      ['/sort/0/direction'],
    ],
    [
      'an unknown key in a sort key',
      'customers',
      { sort: [{ propertyName: 'name', dir: 'asc' }] },
      ['/sort/0/dir'],
    ],
    [
      'a service_id after under a sort',
      'customers',
      { sort: [{ propertyName: 'name' }], after: 1 },
      ['/after'],
    ],
    [
      'a forged cursor',
      'customers',
      { sort: [{ propertyName: 'name' }], after: 'WyJ4IiwieCJd.c2ln' },
      ['/after'],
    ],
    [
      'every fault at once',
      'customers',
      {
        filters: [f('nope', 'EQ', 'x'), f('logins', 'GT', 'x')],
        properties: ['nope'],
        after: 987654321,
      },
      ['/after', '/filters/0/propertyName', '/filters/1/value', '/properties/0'],
    ],
  ]
  for (const [name, entity, body, paths] of cases) {
    test(name, async () => {
      assert.deepEqual(pathsOf(await search(acme, entity, body)).sort(), [...paths].sort())
    })
  }

  test("a sorted page's cursor works only unaltered, for its own sort, entity and account", async () => {
    const sort = [{ propertyName: 'name', direction: 'desc' }]
    const first = await search(acme, 'customers', { sort, limit: 1 })
    const cursor: string = first.body.paging.next.after
    const second = await search(acme, 'customers', { sort, limit: 1, after: cursor })
    assert.equal(second.status, 200)
    assert.notEqual(second.body.results[0].id, first.body.results[0].id)
    const [body, signature] = cursor.split('.')
    const values = JSON.parse(Buffer.from(body, 'base64url').toString())
    const altered = Buffer.from(
      JSON.stringify(values.map((v: string | null) => v && `${v}~`)),
    ).toString('base64url')
    for (const [what, after, other] of [
      ['altered values', `${altered}.${signature}`, {}],
      ['another sort', cursor, { sort: [{ propertyName: 'name' }] }],
      ['another entity', cursor, { entity: 'contacts' }],
    ] as const) {
      const res = await search(acme, 'entity' in other ? other.entity : 'customers', {
        sort: 'sort' in other ? other.sort : sort,
        limit: 1,
        after,
      })
      assert.equal(res.status, 400, what)
      assert.deepEqual(pathsOf(res), ['/after'], what)
    }
  })

  test('customer-only fields on contact search', async () => {
    for (const field of ['fitscore', 'churn_risk', 'upsell_score', 'is_churned', 'owner']) {
      const [error, ...rest] = errorsOf(
        await search(acme, 'contacts', { filters: [f(field, 'EQ', '1')] }),
      )
      assert.equal(rest.length, 0)
      assert.equal(error.path, '/filters/0/propertyName')
      assert.match(error.message, /customer-only/)
    }
  })

  test('a typo of a node key is named with the key it meant', async () => {
    const errors = errorsOf(
      await search(acme, 'customers', { where: { not: { ro: [f('name', 'KNOWN')] } } }),
    )
    assert.match(errors.find((e) => e.path === '/where/not/ro')!.message, /\(did you mean or\?\)/)
    const [deep] = errorsOf(await search(acme, 'customers', { where: nested(5) }))
    assert.match(deep.message, /At most 4 nested/)
  })

  test('nesting far beyond the limit is refused at the limit, without recursing into it', async () => {
    const depth = 100_000
    const body = `{"where":${'{"not":'.repeat(depth)}{"propertyName":"name","operator":"KNOWN"}${'}'.repeat(depth)}}`
    const res = await s.call('POST', '/api/v1/customers/search', body, {
      'service-key': acme.token,
      'content-type': 'application/json',
    })
    assert.deepEqual(pathsOf(res), ['/where/not/not/not/not'])
  })

  test('the operator error lists the allowed operators', async () => {
    const [error] = errorsOf(
      await search(acme, 'customers', { filters: [f('has_sso', 'GT', 'true')] }),
    )
    assert.match(error.message, /allowed: EQ, NEQ, KNOWN, UNKNOWN$/)
  })

  test('invalid JSON', async () => {
    const res = await s.call('POST', '/api/v1/customers/search', '{"filters": [', {
      'service-key': acme.token,
      'content-type': 'application/json',
    })
    assert.equal(res.status, 400)
    assert.match(res.body.detail, /JSON/)
  })
})

test('401 without a key, 403 with a bad key or without the search scope, 405 for other methods', async () => {
  const uploadOnly = (await s.admin('POST', `/accounts/${acme.id}/keys`, { scopes: ['upload'] }))
    .body.token
  for (const path of ['/api/v1/customers/search', '/api/v1/contacts/search']) {
    assert.equal((await s.call('POST', path, {})).status, 401)
    assert.equal(
      (await s.call('POST', path, {}, { 'service-key': `sk_${acme.id}_${'x'.repeat(43)}` })).status,
      403,
    )
    assert.equal((await s.call('POST', path, {}, { 'service-key': uploadOnly })).status, 403)
    const get = await s.call('GET', path, undefined, { 'service-key': acme.token })
    assert.equal(get.status, 405)
    assert.equal(get.headers.get('allow'), 'POST')
  }
})

describe('tag assignment (admin)', () => {
  test('replaces the tags, matching titles case-insensitively, and answers the titles in byte order', async () => {
    await upload(acme, 'customers', [{ external_id: 'tag/me %25 é', name: 'Tag me' }])
    const where = [f('name', 'EQ', 'Tag me')]
    assert.deepEqual(await setTags(acme, 'customers', 'tag/me %25 é', ['trial', 'VIP', 'vip']), {
      titles: ['Trial', 'VIP'],
    })
    assert.deepEqual((await search(acme, 'customers', { filters: where })).body.results[0].tags, [
      'Trial',
      'VIP',
    ])
    assert.deepEqual(await setTags(acme, 'customers', 'tag/me %25 é', ['churn risk']), {
      titles: ['Churn Risk'],
    })
    assert.deepEqual((await search(acme, 'customers', { filters: where })).body.results[0].tags, [
      'Churn Risk',
    ])
    assert.deepEqual(await setTags(acme, 'customers', 'tag/me %25 é', []), { titles: [] })
    assert.deepEqual((await search(acme, 'customers', { filters: where })).body.results[0].tags, [])
  })

  test('contacts too; the other records keep their tags', async () => {
    assert.deepEqual(await setTags(acme, 'contacts', 'k-4', ['Churn Risk']), {
      titles: ['Churn Risk'],
    })
    assert.deepEqual(await contacts(f('tags', 'EQ', 'churn risk')), ['k-4'])
    assert.deepEqual(await setTags(acme, 'contacts', 'k-4', []), { titles: [] })
    assert.deepEqual(await contacts(f('tags', 'KNOWN')), ['k-1', 'k-3'])
  })

  test('unknown titles are a 400 naming each; nothing changes', async () => {
    const res = await s.admin('PUT', `/accounts/${acme.id}/customers/c-a/tags`, {
      titles: ['VIP', 'nope', 'Trial', 'other'],
    })
    assert.deepEqual(pathsOf(res), ['/titles/1', '/titles/3'])
    assert.deepEqual(await customers(f('tags', 'EQ', 'vip')), ['c-a', 'c-b'])
    assert.deepEqual(await customers(f('tags', 'EQ', 'trial')), ['c-b', 'c-d'])
    // Tags of another account are unknown here.
    await s.admin('POST', `/accounts/${other.id}/tags`, { title: 'Only Other' })
    assert.deepEqual(
      pathsOf(
        await s.admin('PUT', `/accounts/${acme.id}/customers/c-a/tags`, { titles: ['Only Other'] }),
      ),
      ['/titles/0'],
    )
    assert.deepEqual(pathsOf(await s.admin('PUT', `/accounts/${acme.id}/customers/c-a/tags`, {})), [
      '/titles',
    ])
    assert.deepEqual(
      pathsOf(await s.admin('PUT', `/accounts/${acme.id}/customers/c-a/tags`, { titles: [1] })),
      ['/titles/0'],
    )
    assert.deepEqual(
      pathsOf(
        await s.admin('PUT', `/accounts/${acme.id}/customers/c-a/tags`, {
          titles: ['VIP', 'a\u0000'],
        }),
      ),
      ['/titles/1'],
    )
  })

  test('unknown records and accounts are 404s', async () => {
    assert.equal(
      (await s.admin('PUT', `/accounts/${acme.id}/customers/nope/tags`, { titles: [] })).status,
      404,
    )
    assert.equal(
      (await s.admin('PUT', `/accounts/${acme.id}/contacts/c-a/tags`, { titles: [] })).status,
      404,
      'a customer is not a contact',
    )
    assert.equal(
      (await s.admin('PUT', `/accounts/${acme.id}/customers/c-x/tags`, { titles: [] })).status,
      404,
      "another account's customer",
    )
    assert.equal(
      (await s.admin('PUT', `/accounts/${acme.id}/customers/%E0%A4%A/tags`, { titles: [] })).status,
      404,
      'a malformed escape',
    )
    assert.equal(
      (await s.admin('PUT', `/accounts/${acme.id}/customers/c-a%00/tags`, { titles: [] })).status,
      404,
      'a NUL',
    )
    assert.equal(
      (await s.admin('PUT', '/accounts/999999/customers/c-a/tags', { titles: [] })).status,
      404,
    )
  })
})
