// The service against the plain in-memory evaluator (src/search/evaluate.ts) of the same rules:
// one random dataset is uploaded, then random filter sets and where trees, sorted or not, are run
// through HTTP, paging with random page sizes, and each answer must be exactly the evaluator's
// matches in its order (byte order of external IDs unsorted; and its exact count, when asked for,
// their number).
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { allPages, byteOrder, dayAgo, search, upload } from './helpers/search.ts'
import { storeScores } from './helpers/db.ts'
import {
  ALLOWED_OPERATORS,
  type Condition,
  type Conditions,
  type Entity,
  type FieldType,
  type Filter,
  leavesOf,
  type PropertyDef,
  type SortSpec,
} from '../src/search/fields.ts'
import { Refusal } from '../src/errors.ts'
import { MAX_TREE_DEPTH, MAX_LEAVES } from '../src/records/search-body.ts'
import { matches, type SearchRecord, sortRecords } from './helpers/evaluate.ts'

const SEED = Number(process.env.SEARCH_PROPERTY_SEED ?? 20261121)
const RUNS = Number(process.env.SEARCH_PROPERTY_RUNS ?? 80)

let s: TestService
let account: Awaited<ReturnType<TestService['account']>>

// Small value domains, so that random filters hit random data often.
const STRINGS = ['US', 'us', 'DE', '', 'a%b', 'a_b', 'x\\y', "o'k", ' ']
const NUMBERS = [-5, 0, 1, 2.5, 10, 40]
const SCORES = [-50, 0, 10, 50, 100]
const DAYS = [-3, 0, 1, 5, 20, 40, 90]
const USERS = ['owner@acme.test', 'Second@Acme.test']
const UPLOADED_OWNERS = [
  'owner@acme.test',
  'OWNER@ACME.TEST',
  'second@acme.test',
  'ghost@acme.test',
]
const TAGS = ['Red', 'green', 'Blue Sky']

const text = fc.oneof(fc.constantFrom(...STRINGS), fc.string({ maxLength: 4 }))
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 3 })
const date = fc.constantFrom(...DAYS).map(dayAgo)
const scores = {
  engagementscore: fc.option(fc.constantFrom(...SCORES), { nil: null }),
  engagementscore_difference: fc.option(fc.constantFrom(-10, 0, 10), { nil: null }),
  last_seen: fc.option(date, { nil: null }),
}

const customerArb = fc.record({
  name: text,
  owner_email: maybe(fc.constantFrom(...UPLOADED_OWNERS)),
  country: maybe(text),
  has_sso: maybe(fc.boolean()),
  plan_started: maybe(date),
  // Two snapshots: the record's metric values are the latest one's, a key missing there
  // the older one's.
  older: fc.record({
    logins: maybe(fc.constantFrom(...NUMBERS)),
    seats: maybe(fc.constantFrom(...NUMBERS)),
  }),
  newer: fc.option(fc.record({ logins: maybe(fc.constantFrom(...NUMBERS)) }), { nil: undefined }),
  tags: fc.subarray(TAGS),
  is_churned: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
  fitscore: fc.option(fc.constantFrom(...SCORES), { nil: null }),
  churn_risk: fc.option(fc.constantFrom(0, 30, 60, 100), { nil: null }),
  ...scores,
})

const contactArb = fc.record({
  name: text,
  customer: fc.nat(),
  role: maybe(text),
  sessions: maybe(fc.constantFrom(...NUMBERS)),
  tags: fc.subarray(TAGS),
  ...scores,
})

// Few distinct timestamps, so that sorts on them meet ties; microseconds apart, as they can be.
const timestamp = fc.constantFrom(
  '2026-01-01T00:00:00.000001Z',
  '2026-01-01T00:00:00.000002Z',
  '2026-03-05T10:00:00.500000Z',
  '2026-11-20T23:59:59.999999Z',
)
const stamps = fc.record({ created_at: timestamp, updated_at: timestamp })

const idArb = fc.string({ minLength: 1, maxLength: 5 })
const dataset = fc.sample(
  fc.record({
    customers: fc.uniqueArray(fc.tuple(idArb, customerArb, stamps), {
      minLength: 50,
      maxLength: 50,
      selector: ([id]) => id,
    }),
    contacts: fc.uniqueArray(fc.tuple(idArb, contactArb, stamps), {
      minLength: 40,
      maxLength: 40,
      selector: ([id]) => id,
    }),
  }),
  { seed: SEED, numRuns: 1 },
)[0]

const compact = <T extends object>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
const storedOwner = (uploaded?: string) =>
  USERS.find((u) => u.toLowerCase() === uploaded?.toLowerCase()) ?? null

const customerRecords: SearchRecord[] = dataset.customers.map(([external_id, c, at]) => ({
  external_id,
  ...at,
  name: c.name,
  is_churned: c.is_churned,
  fitscore: c.fitscore,
  churn_risk: c.churn_risk,
  engagementscore: c.engagementscore,
  engagementscore_difference: c.engagementscore_difference,
  last_seen: c.last_seen,
  owner_email: storedOwner(c.owner_email),
  tags: c.tags,
  attributes: compact({ country: c.country, has_sso: c.has_sso, plan_started: c.plan_started }),
  metrics: compact({ ...c.older, ...(c.newer && compact(c.newer)) }),
}))
const contactRecords: SearchRecord[] = dataset.contacts.map(([external_id, k, at]) => ({
  external_id,
  ...at,
  name: k.name,
  engagementscore: k.engagementscore,
  engagementscore_difference: k.engagementscore_difference,
  last_seen: k.last_seen,
  tags: k.tags,
  customer_external_id: dataset.customers[k.customer % dataset.customers.length][0],
  attributes: compact({ role: k.role }),
  metrics: compact({ sessions: k.sessions }),
}))

let catalog: Record<Entity, PropertyDef[]>

before(async () => {
  s = await startTestService({ apiRateLimit: 100_000 })
  account = await scoredAccount(s)
  await s.admin('POST', `/accounts/${account.id}/users`, { email: USERS[1] })
  for (const title of TAGS) await s.admin('POST', `/accounts/${account.id}/tags`, { title })
  await upload(
    account,
    'customers',
    dataset.customers.map(([external_id, c]) =>
      compact({
        external_id,
        name: c.name,
        owner_email: c.owner_email,
        attributes: compact({
          country: c.country,
          has_sso: c.has_sso,
          plan_started: c.plan_started,
        }),
        metrics: [
          { date: dayAgo(10), ...compact(c.older) },
          ...(c.newer ? [{ date: dayAgo(2), ...compact(c.newer) }] : []),
        ],
      }),
    ),
  )
  for (let i = 0; i < contactRecords.length; i += 100) {
    await upload(
      account,
      'contacts',
      contactRecords.slice(i, i + 100).map((k) => ({
        customer_external_id: k.customer_external_id,
        contact_external_id: k.external_id,
        contact_name: k.name,
        attributes: k.attributes,
        metrics: [{ date: dayAgo(3), ...k.metrics }],
      })),
    )
  }
  // Stored scores and tags, set directly: the scoring engine's values are not what is under test.
  const columns = ['engagementscore', 'engagementscore_difference', 'last_seen'] as const
  for (const [table, links, key, records] of [
    ['customers', 'customer_tags', 'customer_id', customerRecords],
    ['contacts', 'contact_tags', 'contact_id', contactRecords],
  ] as const) {
    const rows = records.map((r) => ({
      external_id: r.external_id,
      tags: r.tags,
      is_churned: r.is_churned ?? false,
      fitscore: r.fitscore ?? null,
      churn_risk: r.churn_risk ?? null,
      ...Object.fromEntries(columns.map((c) => [c, r[c]])),
    }))
    await storeScores(
      s.sql,
      table,
      account.id,
      records.map((r) => ({
        external_id: r.external_id,
        ...Object.fromEntries(columns.map((c) => [c, r[c]])),
        ...(table === 'customers'
          ? { fitscore: r.fitscore ?? null, churn_risk: r.churn_risk ?? null }
          : {}),
      })),
    )
    if (table === 'customers') {
      await s.sql`
        update customers r set is_churned = x.is_churned
        from jsonb_to_recordset(${s.sql.json(rows)}) as x(external_id text, is_churned boolean)
        where r.account_id = ${account.id} and r.external_id = x.external_id`
    }
    await s.sql`
      insert into ${s.sql(links)} (account_id, ${s.sql(key)}, tag_id, external_id)
      select ${account.id}, r.service_id, t.id, r.external_id
      from jsonb_to_recordset(${s.sql.json(rows)}) as x(external_id text, tags text[])
        cross join unnest(x.tags) as wanted(title)
        join ${s.sql(table)} r on r.account_id = ${account.id} and r.external_id = x.external_id
        join tags t on t.account_id = ${account.id} and t.title = wanted.title`
    // Last, as any write before may touch them.
    const stamped = records.map(({ external_id, created_at, updated_at }) => ({
      external_id,
      created_at,
      updated_at,
    }))
    await s.sql`
      update ${s.sql(table)} r set created_at = x.created_at, updated_at = x.updated_at
      from jsonb_to_recordset(${s.sql.json(stamped)})
        as x(external_id text, created_at timestamptz, updated_at timestamptz)
      where r.account_id = ${account.id} and r.external_id = x.external_id`
  }
  const defs = await s.sql`select entity, codename, kind, type from property_defs
      where account_id = ${account.id}`
  catalog = {
    customer: defs.filter((d) => d.entity === 'customer') as unknown as PropertyDef[],
    contact: defs.filter((d) => d.entity === 'contact') as unknown as PropertyDef[],
  }
})
after(() => s?.stop())

// The fields of each entity, with the domain their operands are drawn from.
const number = fc.oneof(
  fc.constantFrom(...NUMBERS).map(String),
  fc.constantFrom('1.0', '4e1', '25e-1', '-0'),
)
const score = fc.constantFrom(...SCORES, 5, -10).map(String)
const bool = fc.constantFrom('true', 'false')
const tag = fc.constantFrom('red', 'RED', 'Green', 'blue sky', 'nope')
const FIELDS: Record<Entity, [string, FieldType, fc.Arbitrary<string>][]> = {
  customer: [
    ['name', 'string', text],
    ['country', 'string', text],
    ['logins', 'number', number],
    ['seats', 'number', number],
    ['has_sso', 'boolean', bool],
    ['plan_started', 'date', date],
    ['fitscore', 'number', score],
    ['engagementscore', 'number', score],
    ['engagementscore_difference', 'number', score],
    ['churn_risk', 'number', fc.constantFrom('0', '30', '50', '100')],
    ['last_seen', 'date', date],
    ['owner', 'owner', fc.constantFrom('owner@acme.test', 'SECOND@acme.test', 'ghost@acme.test')],
    ['tags', 'tags', tag],
    ['is_churned', 'boolean', bool],
  ],
  contact: [
    ['name', 'string', text],
    ['role', 'string', text],
    ['sessions', 'number', number],
    ['engagementscore', 'number', score],
    ['engagementscore_difference', 'number', score],
    ['last_seen', 'date', date],
    ['tags', 'tags', tag],
    [
      'customer_external_id',
      'external_id',
      fc.oneof(
        fc.constantFrom(...customerRecords.map((r) => r.external_id)),
        fc.constantFrom('nope', 'C'),
      ),
    ],
  ],
}
const days = fc.constantFrom('0', '1', '3', '10', '30', '60')
const substring = fc.oneof(
  fc.constantFrom('u', 'U', '%', '_', '\\', 'a', '', "'"),
  fc.string({ maxLength: 2 }),
)

// A list made long (300 values) with values of the field's type that no record holds, nor any
// name that the lists' own values may draw: a long list must match what the short one does.
// Booleans take no lists.
const PADDING: Record<Exclude<FieldType, 'boolean'>, (i: number) => string> = {
  string: (i) => `padding ${i}`,
  number: (i) => String(1e6 + i / 8),
  date: (i) => dayAgo(-1000 - i),
  owner: (i) => `padding${i}@acme.test`,
  tags: (i) => `padding ${i}`,
  external_id: (i) => `padding ${i}`,
}
const padded = (values: string[], type: FieldType) => [
  ...values,
  ...Array.from({ length: 300 - values.length }, (_, i) =>
    PADDING[type as keyof typeof PADDING](i),
  ),
]

const filterArb = (entity: Entity): fc.Arbitrary<Filter> =>
  fc.constantFrom(...FIELDS[entity]).chain(([propertyName, type, values]) =>
    fc.constantFrom(...ALLOWED_OPERATORS[type]).chain((operator): fc.Arbitrary<Filter> => {
      if (operator === 'KNOWN' || operator === 'UNKNOWN')
        return fc.constant({ propertyName, operator })
      if (operator === 'IN' || operator === 'NIN') {
        const list = fc.tuple(fc.array(values, { minLength: 1, maxLength: 3 }), fc.boolean())
        return list.map(([v, long]) => ({
          propertyName,
          operator,
          values: long ? padded(v, type) : v,
        }))
      }
      const operand =
        operator === 'GTD' || operator === 'LTD'
          ? days
          : operator === 'LIKE' || operator === 'NLIKE'
            ? substring
            : values
      return operand.map((value) => ({ propertyName, operator, value }))
    }),
  )

// Trees up to the depth limit: a node at the top, below it a leaf as likely as a node, so
// that most stay small.
const conditionArb = (entity: Entity, depth = 0): fc.Arbitrary<Condition> => {
  if (depth === MAX_TREE_DEPTH) return filterArb(entity)
  const child = conditionArb(entity, depth + 1)
  const list = fc.array(child, { minLength: 1, maxLength: 3 })
  return fc.oneof(
    { weight: depth === 0 ? 0 : 3, arbitrary: filterArb(entity) },
    { weight: 1, arbitrary: list.map((and) => ({ and })) },
    { weight: 1, arbitrary: list.map((or) => ({ or })) },
    { weight: 1, arbitrary: child.map((not) => ({ not })) },
  )
}

// Every sortable field of each entity.
const SORTABLE: Record<Entity, string[]> = {
  customer: [
    ...FIELDS.customer.map(([name]) => name).filter((name) => name !== 'owner' && name !== 'tags'),
    'createdAt',
    'updatedAt',
  ],
  contact: [
    ...FIELDS.contact.map(([name]) => name).filter((name) => name !== 'tags'),
    'createdAt',
    'updatedAt',
  ],
}
const sortArb = (entity: Entity) =>
  fc.array(
    fc.record(
      {
        propertyName: fc.constantFrom(...SORTABLE[entity]),
        direction: fc.constantFrom('asc', 'desc'),
      },
      { requiredKeys: ['propertyName'] },
    ),
    { minLength: 1, maxLength: 3 },
  )

const requestArb = (conditions: (entity: Entity) => fc.Arbitrary<Conditions>, sorted = false) =>
  fc.constantFrom<Entity>('customer', 'contact').chain((entity) =>
    fc.record({
      entity: fc.constant(entity),
      conditions: conditions(entity),
      limit: fc.integer({ min: 3, max: 60 }),
      count: fc.boolean(),
      sort: sorted ? sortArb(entity) : fc.constant(undefined as SortSpec[] | undefined),
    }),
  )

const RECORDS: Record<Entity, SearchRecord[]> = {
  customer: customerRecords,
  contact: contactRecords,
}

// Random requests, each of which must page to exactly what the evaluator matches; a third
// of them at least must have an answer that is neither empty nor everything: the ones that
// tell conditions apart.
const compare = async (arb: ReturnType<typeof requestArb>) => {
  let telling = 0
  let reordered = 0
  await fc.assert(
    fc.asyncProperty(arb, async ({ entity, conditions, limit, count, sort }) => {
      const today = new Date().toISOString().slice(0, 10)
      let expected: string[]
      try {
        const matching = RECORDS[entity].filter((r) =>
          matches(r, conditions, catalog[entity], today, entity),
        )
        expected = sort
          ? sortRecords(matching, sort, catalog[entity], entity).map((r) => r.external_id)
          : matching.map((r) => r.external_id).sort(byteOrder)
      } catch (err) {
        if (!(err instanceof Refusal)) throw err
        assert.equal((await search(account, `${entity}s`, { ...conditions, sort })).status, 400)
        return
      }
      const body = { ...conditions, limit, sort, ...(count && { count: 'exact' }) }
      const pages = await allPages(account, `${entity}s`, body)
      const got = pages.flatMap((p) => p.results.map((r: { id: string }) => r.id))
      assert.deepEqual(got, expected)
      assert.equal(pages.length, Math.max(1, Math.ceil(expected.length / limit)))
      for (const page of pages) assert.equal(page.total, count ? expected.length : undefined)
      if (expected.length > 0 && expected.length < RECORDS[entity].length) telling++
      if (sort && got.join() !== [...got].sort(byteOrder).join()) reordered++
    }),
    { numRuns: RUNS, seed: SEED },
  )
  assert.ok(telling >= RUNS / 3, `only ${telling} of ${RUNS} runs had a partial answer`)
  return reordered
}

test('random filter sets: the service answers exactly what the in-memory evaluator matches', async () => {
  await compare(
    requestArb((entity) =>
      fc.array(filterArb(entity), { maxLength: 4 }).map((filters) => ({ filters })),
    ),
  )
})

test('random where trees: the service answers exactly what the in-memory evaluator matches', async () => {
  const trees = (entity: Entity) =>
    conditionArb(entity)
      .filter((where) => leavesOf(where).length <= MAX_LEAVES)
      .map((where) => ({ where }))
  await compare(requestArb(trees))
})

test("random sorts: the service pages in exactly the in-memory evaluator's order", async () => {
  const filters = (entity: Entity) =>
    fc.array(filterArb(entity), { maxLength: 2 }).map((f) => ({ filters: f }))
  const reordered = await compare(requestArb(filters, true))
  assert.ok(
    reordered >= RUNS / 2,
    `only ${reordered} of ${RUNS} sorted runs were not in external-ID order`,
  )
})

test('the dataset is varied enough for the comparison to mean something', async () => {
  const active = customerRecords.filter((r) => !r.is_churned).length
  assert.ok(active > 10 && active < customerRecords.length, `${active} active customers`)
  assert.equal((await allPages(account, 'customers', { limit: 1000 }))[0].results.length, active)
  assert.equal(
    (await allPages(account, 'contacts', { limit: 1000 }))[0].results.length,
    contactRecords.length,
  )
})

// Under every sort key in both directions, with new records written between pages: every record
// that matched before the first page is on exactly one page, and no record is on two. New records
// may land on a later page or before the cursor, so they are allowed but not required.
test('paging under every sort returns each record exactly once, also while records are inserted', async () => {
  const [anyCustomer] =
    await s.sql`select service_id from customers where account_id = ${account.id} limit 1`
  let inserted = 0
  const insert = async (entity: Entity) => {
    const n = inserted++
    const values = {
      name: `new ${n % 3}`,
      country: STRINGS[n % STRINGS.length],
      logins: NUMBERS[n % NUMBERS.length],
    }
    if (entity === 'customer') {
      await s.sql`insert into customers (account_id, external_id, name, attributes, metrics)
        values (${account.id}, ${`new-${n}`}, ${values.name},
          ${s.sql.json({ country: values.country })},
          ${s.sql.json({ logins: values.logins })})`
    } else {
      await s.sql`insert into contacts (account_id, external_id, customer_id, name, attributes)
        values (${account.id}, ${`new-${n}`}, ${anyCustomer.service_id}, ${values.name},
          ${s.sql.json({ role: values.country })})`
    }
  }
  for (const entity of ['customer', 'contact'] as const) {
    const before = RECORDS[entity].filter((r) => !r.is_churned).map((r) => r.external_id)
    for (const propertyName of SORTABLE[entity]) {
      for (const direction of ['asc', 'desc']) {
        const seen: string[] = []
        for (let after: string | undefined; ; ) {
          const res = await search(account, `${entity}s`, {
            sort: [{ propertyName, direction }],
            limit: 25,
            after,
          })
          assert.equal(res.status, 200, JSON.stringify(res.body))
          seen.push(...res.body.results.map((r: { id: string }) => r.id))
          if (!res.body.paging) break
          after = res.body.paging.next.after
          assert.equal(typeof after, 'string')
          await insert(entity)
        }
        const where = `${entity} sort ${propertyName} ${direction}`
        assert.equal(new Set(seen).size, seen.length, `${where}: a record on two pages`)
        assert.deepEqual(
          before.filter((id) => !seen.includes(id)),
          [],
          `${where}: records missing`,
        )
      }
    }
  }
  assert.ok(inserted > 30, `${inserted} records inserted`)
  await s.sql`delete from contacts where account_id = ${account.id} and external_id like 'new-%'`
  await s.sql`delete from customers where account_id = ${account.id} and external_id like 'new-%'`
})
