import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { contextNeeds } from '../src/search/criteria.ts'
import {
  ALLOWED_OPERATORS,
  type Condition,
  type Filter,
  type PropertyDef,
} from '../src/search/fields.ts'
import { type FieldError, Refusal } from '../src/errors.ts'
import { checkSearch, compileCount, compileSearch, type SearchInput } from '../src/search/sql.ts'
import { matches, type SearchRecord } from './helpers/evaluate.ts'
import { cursorScope, openCursor, resolveSort, sealCursor } from '../src/search/sort.ts'
import { planNodes, searchDatabase } from './helpers/compiled.ts'
import { storeScores } from './helpers/db.ts'
import { clusterFromEnv } from './helpers/citus.ts'

const TODAY = '2026-11-21'

// The compiled queries run against a few records (test/helpers/compiled.ts): active customers c1,
// c2, c4, c5, c6 and churned c3 of account 7.
let db: Awaited<ReturnType<typeof searchDatabase>>
before(async () => {
  db = await searchDatabase()
})
after(() => db.stop())
const found = (over: Partial<SearchInput>) => db.ids(compileSearch(input(over)))
// Whether each read of the table is below a Limit: the page's own query, cut before what joins it.
const readUnderLimit = async (over: Partial<SearchInput>, table: string) =>
  planNodes(await db.plan(compileSearch(input(over))))
    .filter(({ node }) => node['Relation Name'] === table)
    .map(({ above }) => above.includes('Limit'))

const catalog: PropertyDef[] = [
  { codename: 'plan', kind: 'attribute', type: 'string' },
  { codename: 'seats', kind: 'attribute', type: 'number' },
  { codename: 'sso', kind: 'attribute', type: 'boolean' },
  { codename: 'renewal_date', kind: 'attribute', type: 'date' },
  { codename: 'logins', kind: 'metric', type: 'number' },
  { codename: 'a"b', kind: 'attribute', type: 'string' },
]

function input(over: Partial<SearchInput>): SearchInput {
  return {
    entity: 'customer',
    accountId: 7,
    limit: 100,
    catalog,
    today: TODAY,
    ...over,
  } as SearchInput
}

function errorsOf(over: Partial<SearchInput>): FieldError[] {
  try {
    compileSearch(input(over))
  } catch (e) {
    if (e instanceof Refusal && e.status === 400) return e.errors ?? []
    throw e
  }
  return assert.fail('expected a 400')
}

function pathsOf(over: Partial<SearchInput>): string[] {
  return errorsOf(over).map((e) => e.path)
}

describe('compileSearch rejects bad requests with paths', () => {
  test('unknown propertyName, including Object.prototype names', () => {
    for (const name of ['nope', 'constructor', '__proto__', 'upsell']) {
      assert.deepEqual(pathsOf({ filters: [{ propertyName: name, operator: 'EQ', value: 'x' }] }), [
        '/filters/0/propertyName',
      ])
    }
  })

  test('unknown propertyName: did you mean, the properties when they are few, the name cut to 200', () => {
    const [typo] = errorsOf({ filters: [{ propertyName: 'logns', operator: 'EQ', value: '1' }] })
    assert.match(
      typo.message,
      /^unknown property "logns" \(did you mean logins\?\); the properties are name, is_churned,/,
    )
    assert.match(typo.message, /renewal_date, logins, a"b$/)
    const many = [
      ...catalog,
      ...Array.from({ length: 30 }, (_, i) => ({ ...catalog[0], codename: `extra_${i}` })),
    ]
    const [long] = errorsOf({
      catalog: many,
      filters: [{ propertyName: 'extra_x1', operator: 'EQ', value: '1' }],
    })
    assert.equal(long.message, 'unknown property "extra_x1" (did you mean extra_1?)')
    const [huge] = errorsOf({
      filters: [{ propertyName: 'x'.repeat(100_000), operator: 'EQ', value: '1' }],
    })
    assert.match(
      huge.message,
      /^unknown property "x{200}\.\.\. \(100,000 characters\)"; the properties are/,
    )
    const [asked] = errorsOf({ properties: ['seets'] })
    assert.match(asked.message, /did you mean seats\?/)
  })

  // The console's own words for the scores: a name the field begins with, or a word of it.
  test('unknown propertyName: did you mean the field a word begins', () => {
    const meant = (entity: SearchInput['entity'], name: string) =>
      /\(did you mean (\w+)\?\)/.exec(
        errorsOf({ entity, filters: [{ propertyName: name, operator: 'KNOWN' }] })[0].message,
      )?.[1]
    for (const [name, field] of [
      ['engagement', 'engagementscore'],
      ['Engagement', 'engagementscore'],
      ['fit', 'fitscore'],
      ['churn', 'churn_risk'],
      ['risk', 'churn_risk'],
      ['upsell', 'upsell_score'],
      ['reactivated', 'reactivated_date'],
      ['renewal', 'renewal_date'],
    ]) {
      assert.equal(meant('customer', name), field, name)
    }
    assert.equal(meant('contact', 'engagement'), 'engagementscore')
    assert.equal(meant('contact', 'customer'), 'customer_external_id')
    // A typo still wins, and two letters begin too much to mean anything.
    assert.equal(meant('customer', 'fitscor'), 'fitscore')
    assert.equal(meant('customer', 'en'), undefined)
    assert.equal(meant('customer', 'qqqq'), undefined)
  })

  test('operator not allowed for the field type lists the allowed ones', () => {
    const cases: [SearchInput['entity'], string, string, keyof typeof ALLOWED_OPERATORS][] = [
      ['customer', 'seats', 'LIKE', 'number'],
      ['customer', 'fitscore', 'GTD', 'number'],
      ['customer', 'renewal_date', 'NLIKE', 'date'],
      ['customer', 'plan', 'GT', 'string'],
      ['customer', 'name', 'LTD', 'string'],
      ['customer', 'sso', 'LT', 'boolean'],
      ['customer', 'is_churned', 'IN', 'boolean'],
      ['customer', 'owner', 'LIKE', 'owner'],
      ['customer', 'tags', 'GTE', 'tags'],
      ['contact', 'customer_external_id', 'KNOWN', 'external_id'],
      ['contact', 'customer_external_id', 'LIKE', 'external_id'],
    ]
    for (const [entity, propertyName, operator, type] of cases) {
      const [error, ...rest] = errorsOf({
        entity,
        filters: [{ propertyName, operator, value: '1' }],
      })
      assert.equal(rest.length, 0)
      assert.equal(error.path, '/filters/0/operator', `${propertyName} ${operator}`)
      assert.match(error.message, new RegExp(`allowed: ${ALLOWED_OPERATORS[type].join(', ')}$`))
    }
  })

  test('unknown operator', () => {
    for (const operator of ['BETWEEN', 'eq', '']) {
      const [error] = errorsOf({ filters: [{ propertyName: 'seats', operator, value: '1' }] })
      assert.equal(error.path, '/filters/0/operator')
      assert.match(error.message, /^unknown operator/)
    }
  })

  test('customer-only fields on contacts, even when a contact codename shadows them', () => {
    const contactCatalog: PropertyDef[] = [{ codename: 'owner', kind: 'attribute', type: 'string' }]
    for (const propertyName of ['fitscore', 'churn_risk', 'upsell_score', 'is_churned', 'owner']) {
      const [error] = errorsOf({
        entity: 'contact',
        catalog: contactCatalog,
        filters: [{ propertyName, operator: 'KNOWN' }],
      })
      assert.equal(error.path, '/filters/0/propertyName')
      assert.match(error.message, /customer-only field/)
    }
  })

  test('missing value or values', () => {
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'seats', operator: 'EQ' }] }), [
      '/filters/0/value',
    ])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'plan', operator: 'LIKE' }] }), [
      '/filters/0/value',
    ])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'last_seen', operator: 'GTD' }] }), [
      '/filters/0/value',
    ])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'seats', operator: 'IN' }] }), [
      '/filters/0/values',
    ])
    assert.deepEqual(
      pathsOf({ filters: [{ propertyName: 'tags', operator: 'NIN', values: [] }] }),
      ['/filters/0/values'],
    )
    // IN falls back to a single `value`; KNOWN and UNKNOWN take nothing.
    compileSearch(input({ filters: [{ propertyName: 'seats', operator: 'IN', value: '1' }] }))
    compileSearch(input({ filters: [{ propertyName: 'seats', operator: 'UNKNOWN' }] }))
  })

  test('values that do not parse for the type', () => {
    const bad: [string, string, string][] = [
      ['seats', 'EQ', 'abc'],
      ['seats', 'EQ', ''],
      ['seats', 'GT', ' 1'],
      ['seats', 'LT', '0x10'],
      ['fitscore', 'EQ', 'Infinity'],
      ['fitscore', 'EQ', '1e999'],
      ['renewal_date', 'EQ', '2026-02-30'],
      ['renewal_date', 'LT', '2026-1-01'],
      ['last_seen', 'GT', '0000-01-01'],
      ['last_seen', 'EQ', '2026-11-21T00:00:00Z'],
      ['sso', 'EQ', 'TRUE'],
      ['is_churned', 'EQ', '1'],
      ['last_seen', 'GTD', '-1'],
      ['last_seen', 'LTD', '1.5'],
      ['renewal_date', 'GTD', 'x'],
      ['renewal_date', 'GTD', '1000001'],
      ['plan', 'EQ', 'nul\u0000byte'],
      ['plan', 'EQ', 'lone \ud800 surrogate'],
      ['plan', 'LIKE', '\udc00'],
    ]
    for (const [propertyName, operator, value] of bad) {
      assert.deepEqual(
        pathsOf({ filters: [{ propertyName, operator, value }] }),
        ['/filters/0/value'],
        `${propertyName} ${operator} ${value}`,
      )
    }
    assert.deepEqual(
      pathsOf({
        filters: [{ propertyName: 'seats', operator: 'NIN', values: ['1', 'x', '2', ''] }],
      }),
      ['/filters/0/values/1', '/filters/0/values/3'],
    )
    compileSearch(input({ filters: [{ propertyName: 'seats', operator: 'EQ', value: '-1.5e3' }] }))
    compileSearch(
      input({ filters: [{ propertyName: 'renewal_date', operator: 'EQ', value: '2024-02-29' }] }),
    )
  })

  test('unknown requested property', () => {
    assert.deepEqual(pathsOf({ properties: ['plan', 'nope', 'name'] }), [
      '/properties/1',
      '/properties/2',
    ])
  })

  test('every error of the request is reported at once', () => {
    const paths = pathsOf({
      properties: ['x'],
      filters: [
        { propertyName: 'seats', operator: 'EQ', value: '1' },
        { propertyName: 'nope', operator: 'EQ', value: '1' },
        { propertyName: 'seats', operator: 'LIKE', value: '1' },
        { propertyName: 'seats', operator: 'EQ', value: 'x' },
      ],
    })
    assert.deepEqual(paths, [
      '/filters/1/propertyName',
      '/filters/2/operator',
      '/filters/3/value',
      '/properties/0',
    ])
  })
})

describe('compileSearch SQL', () => {
  test('user strings appear only in params', () => {
    const nasty = "'; drop table x; --"
    const { text, params } = compileSearch(
      input({
        accountId: '7; drop table y',
        properties: ['a"b'],
        lookups: { users: new Map([[nasty, 3]]), tags: new Map() },
        filters: [
          { propertyName: 'a"b', operator: 'EQ', value: nasty },
          { propertyName: 'plan', operator: 'LIKE', value: '%\\_' + nasty },
          { propertyName: 'owner', operator: 'IN', values: [nasty] },
          { propertyName: 'tags', operator: 'NEQ', value: nasty },
          { propertyName: 'last_seen', operator: 'GTD', value: '3' },
        ],
      }),
    )
    for (const s of [nasty, 'a"b', 'drop']) assert.ok(!text.includes(s), s)
    for (const s of [
      JSON.stringify({ 'a"b': nasty }),
      '{"a\\"b"}',
      '7; drop table y',
      TODAY,
      '%\\_' + nasty,
    ])
      assert.ok(params.includes(s), s)
    assert.match(text, /^select /)
    assert.match(text, /where r\.account_id = \$1::text::bigint/)
  })

  test('the SQL text does not depend on any user string', () => {
    const stringArb = fc.string({ unit: 'binary' }).filter((s) => !s.includes('\u0000'))
    const shaped = (value: string, codename: string): SearchInput => {
      const cat: PropertyDef[] = [{ codename, kind: 'metric', type: 'string' }]
      return input({
        entity: 'contact',
        catalog: cat,
        properties: [codename],
        afterServiceId: 7,
        lookups: { users: new Map(), tags: new Map([[value, 5]]) },
        filters: [
          { propertyName: codename, operator: 'NLIKE', value },
          { propertyName: 'name', operator: 'IN', values: [value, value] },
          { propertyName: 'customer_external_id', operator: 'NEQ', value },
          { propertyName: 'tags', operator: 'EQ', value },
        ],
      })
    }
    const reference = compileSearch(shaped('v', 'c')).text
    fc.assert(
      fc.property(
        stringArb,
        stringArb.filter((s) => !['name', 'tags', 'customer_external_id'].includes(s)),
        (v, c) => {
          assert.equal(compileSearch(shaped(v, c)).text, reference)
        },
      ),
    )
  })

  // postgres.js serializes a parameter by the type the server reports for it: text, or an array,
  // whose literal it sends as it is given (its boolean and date serializers would mangle strings).
  test('every placeholder is a text or array parameter and every parameter is used', () => {
    const { text, params } = compileSearch(
      input({
        afterServiceId: 9,
        filters: [
          { propertyName: 'renewal_date', operator: 'LTD', value: '7' },
          { propertyName: 'seats', operator: 'NIN', values: ['1', '2'] },
          { propertyName: 'sso', operator: 'EQ', value: 'true' },
        ],
      }),
    )
    assert.ok(params.every((p) => typeof p === 'string'))
    const used = new Set([...text.matchAll(/\$(\d+)::(text|[a-z]+\[\])/g)].map((m) => Number(m[1])))
    assert.deepEqual(
      [...used].sort((a, b) => a - b),
      params.map((_, i) => i + 1),
    )
    assert.equal([...text.matchAll(/\$\d+(?!\d|::text|::[a-z]+\[\])/g)].length, 0)
  })

  test('boolean and number values are bound in canonical form', () => {
    const { params } = compileSearch(
      input({
        filters: [
          { propertyName: 'seats', operator: 'EQ', value: '1.50e1' },
          { propertyName: 'sso', operator: 'NEQ', value: 'false' },
        ],
      }),
    )
    assert.ok(params.includes('{"seats":15}'))
    assert.ok(params.includes('{"sso":false}'))
  })

  test('paging: keyset after the external id of the after record, one extra row', async () => {
    assert.deepEqual(await found({ limit: 1 }), ['c1', 'c2'])
    assert.deepEqual(
      await found({ limit: 1, afterServiceId: await db.serviceId('customers', 'c1') }),
      ['c2', 'c4'],
    )
    // The after record is a contact of this account (service ids of customers and
    // contacts overlap).
    const p1 = await db.serviceId('contacts', 'p1')
    assert.deepEqual(await found({ entity: 'contact', catalog: [], afterServiceId: p1 }), [
      'p2',
      'p3',
    ])
  })

  test('properties: all, a selection, or none', async () => {
    const properties = async (over: Partial<SearchInput>) =>
      (await db.rows(compileSearch(input(over)))).find((r) => r.id === 'c2')!.properties
    const all = { plan: 'basic', seats: 1, renewal_date: '2026-01-05', logins: 2.5 }
    assert.deepEqual(await properties({}), all)
    assert.deepEqual(await properties({ properties: [] }), {})
    assert.deepEqual(await properties({ properties: ['plan', 'logins', 'plan'] }), {
      plan: 'basic',
      logins: 2.5,
    })
  })

  test('customer search is limited to active customers unless is_churned is filtered', async () => {
    assert.deepEqual(await found({}), ['c1', 'c2', 'c4', 'c5', 'c6'])
    assert.deepEqual(
      await found({ filters: [{ propertyName: 'is_churned', operator: 'EQ', value: 'true' }] }),
      ['c3'],
    )
    const any = await found({ filters: [{ propertyName: 'is_churned', operator: 'KNOWN' }] })
    assert.deepEqual(any, ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'])
    // Contacts of a churned customer are found.
    assert.deepEqual(await found({ entity: 'contact', catalog: [] }), ['p1', 'p2', 'p3'])
  })

  const pageCutTitle =
    'the page is cut before the columns join the scores, which its query joins only when a filter reads them'
  test(pageCutTitle, async () => {
    assert.deepEqual(await readUnderLimit({}, 'customer_scores'), [false])
    const scored = { filters: [{ propertyName: 'engagementscore', operator: 'GT', value: '5' }] }
    assert.ok((await readUnderLimit(scored, 'customer_scores')).includes(true))
    assert.deepEqual(await found(scored), ['c1'])
    assert.equal((await db.rows(compileSearch(input({ limit: 1 }))))[0].engagementscore, 10)
  })

  test('contact search selects the owning customer, scoped to the account', async () => {
    const filters = [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'c1' }]
    const rows = await db.rows(compileSearch(input({ entity: 'contact', catalog: [], filters })))
    assert.deepEqual(
      rows.map((r) => [r.id, r.name, r.customer_external_id, r.customer_service_id]),
      [['p1', 'Pat', 'c1', await db.serviceId('customers', 'c1')]],
    )
    for (const column of ['createdAt', 'updatedAt', 'tags']) assert.ok(column in rows[0], column)
    // The customer is read in the page's query, since the filter reads it.
    assert.ok(
      (await readUnderLimit({ entity: 'contact', catalog: [], filters }, 'customers')).includes(
        true,
      ),
    )
  })

  test('a core field wins over a custom codename of the same name', async () => {
    const shadowing: PropertyDef[] = [{ codename: 'name', kind: 'attribute', type: 'number' }]
    const filters = [{ propertyName: 'name', operator: 'LIKE', value: 'a' }]
    assert.deepEqual(await found({ catalog: shadowing, filters }), ['c1', 'c6'])
  })

  test('owner and tags operands compile to the ids the caller looked up', async () => {
    const lookups = {
      users: new Map([
        ['Ann@x.io', 3],
        ['bob@x.io', 4],
      ]),
      tags: new Map([
        ['red', 8],
        ['blue', 9],
      ]),
    }
    const where = (filters: Filter[]) => found({ filters, lookups })
    assert.deepEqual(await where([{ propertyName: 'owner', operator: 'EQ', value: 'Ann@x.io' }]), [
      'c1',
      'c5',
    ])
    const nin = {
      propertyName: 'owner',
      operator: 'NIN',
      values: ['Ann@x.io', 'bob@x.io', 'zed@x.io', 'Ann@x.io'],
    }
    assert.deepEqual(await where([nin]), ['c4', 'c6'])
    assert.deepEqual(
      await where([{ propertyName: 'owner', operator: 'IN', values: ['zed@x.io'] }]),
      [],
    )
    assert.deepEqual(await where([{ propertyName: 'tags', operator: 'EQ', value: 'red' }]), ['c1'])
    // Several tags, and negated ones, test the record's own tag ids (sql/021); tag conditions are
    // never null, so their negation is a plain NOT.
    const some = { propertyName: 'tags', operator: 'IN', values: ['red', 'nope', 'blue', 'red'] }
    assert.deepEqual(await where([some]), ['c1', 'c2'])
    assert.deepEqual(await where([{ propertyName: 'tags', operator: 'NEQ', value: 'red' }]), [
      'c2',
      'c4',
      'c5',
      'c6',
    ])
    const all = ['c1', 'c2', 'c4', 'c5', 'c6']
    assert.deepEqual(await where([{ propertyName: 'tags', operator: 'NEQ', value: 'nope' }]), all)
    assert.deepEqual(await where([{ propertyName: 'tags', operator: 'EQ', value: 'nope' }]), [])
    assert.deepEqual(await where([{ propertyName: 'tags', operator: 'UNKNOWN' }]), [
      'c4',
      'c5',
      'c6',
    ])
    // Lists of values bind as one array parameter each, however long.
    const many = Array.from({ length: 50 }, (_, i) => `u${i}@x.io`)
    const users = new Map(many.map((email, i) => [email, 100 + i]))
    const params = (values: string[]) =>
      compileSearch(
        input({
          filters: [{ propertyName: 'owner', operator: 'IN', values }],
          lookups: { ...lookups, users },
        }),
      ).params.length
    assert.equal(params(many), params(many.slice(0, 2)))
    assert.throws(
      () =>
        compileSearch(input({ filters: [{ propertyName: 'tags', operator: 'EQ', value: 'red' }] })),
      (e) => !(e instanceof Refusal),
    )
    // KNOWN needs no lookup.
    assert.doesNotThrow(() =>
      compileSearch(
        input({
          filters: [
            { propertyName: 'tags', operator: 'KNOWN' },
            { propertyName: 'owner', operator: 'UNKNOWN' },
          ],
        }),
      ),
    )
  })

  test('contextNeeds: the catalog for custom codenames, the strings of owner and tags filters', () => {
    const filters = [
      { propertyName: 'owner', operator: 'IN', values: ['a@x.io', 'b@x.io'] },
      { propertyName: 'owner', operator: 'EQ', value: 'a@x.io' },
      {
        propertyName: 'tags',
        operator: 'NEQ',
        value: 'red',
        values: ['blue', 7 as unknown as string],
      },
      { propertyName: 'name', operator: 'EQ', value: 'not looked up' },
    ]
    assert.deepEqual(contextNeeds('customer', { filters }), {
      catalog: false,
      emails: ['a@x.io', 'b@x.io'],
      titles: ['red', 'blue'],
    })
    // owner is no core field of contacts: the catalog tells whether a contact property
    // has the name.
    assert.deepEqual(contextNeeds('contact', { filters }), {
      catalog: true,
      emails: [],
      titles: ['red', 'blue'],
    })
    assert.deepEqual(contextNeeds('customer', {}), { catalog: false, emails: [], titles: [] })
    assert.equal(contextNeeds('customer', {}, []).catalog, true)
    assert.equal(
      contextNeeds('customer', { filters: [{ propertyName: 'plan', operator: 'EQ', value: 'x' }] })
        .catalog,
      true,
    )
  })

  test('json: each record as one JSON text beside its service_id, in the same order', async () => {
    const plain = await db.rows(compileSearch(input({ limit: 5 })))
    const json = await db.rows(compileSearch(input({ limit: 5, json: true })))
    assert.deepEqual(
      json.map((r) => Object.keys(r)),
      plain.map(() => ['json', 'service_id']),
    )
    const records = json.map((r) => JSON.parse(r.json))
    assert.deepEqual(
      records.map((r) => r.id),
      plain.map((r) => r.id),
    )
    for (const [i, record] of records.entries()) {
      assert.deepEqual(Object.keys(record), Object.keys(plain[i]))
      assert.deepEqual(record.properties, plain[i].properties)
      assert.equal(json[i].service_id, await db.serviceId('customers', record.id))
    }
  })

  test('EQ on a custom property is jsonb containment, IN one array of canonical JSON values', async () => {
    const known = { propertyName: 'is_churned', operator: 'KNOWN' }
    const logins = (values: string[]) =>
      found({ filters: [{ propertyName: 'logins', operator: 'IN', values }, known] })
    assert.deepEqual(await logins(['1', '2.50']), ['c2', 'c3'])
    const renewal = { propertyName: 'renewal_date', operator: 'NEQ', value: '2026-01-05' }
    assert.deepEqual(await found({ filters: [renewal] }), ['c1', 'c4', 'c5', 'c6'])
    assert.deepEqual(
      await found({ filters: [{ propertyName: 'plan', operator: 'EQ', value: 'pro' }] }),
      ['c1', 'c5'],
    )
    const params = (values: string[]) =>
      compileSearch(input({ filters: [{ propertyName: 'logins', operator: 'IN', values }] })).params
        .length
    assert.equal(params(Array.from({ length: 50 }, (_, i) => String(i))), params(['1', '2']))
  })
})

// IN lists of 1,000 values, padded with values no record holds: they match what the short list
// matches, and their plans compare with one constant array (which PostgreSQL hashes), not with an
// expression that reads the list again for every row, nor with one comparison per value.
describe('compileSearch: long IN lists', () => {
  const day = (i: number) => new Date(Date.UTC(2030, 0, 1 + i)).toISOString().slice(0, 10)
  const number = (i: number) => String(1000 + i)
  const text = (i: number) => `pad ${i}`
  // The array's type is the column's own for a core field: PostgreSQL hashes only what
  // hashes alike.
  const cases: {
    entity?: SearchInput['entity']
    field: string
    short: string[]
    pad: (i: number) => string
    IN: string[]
    NIN: string[]
    array: string
  }[] = [
    // Fractions and values beyond int4 match no integer column: 2.5, 2^31, 1e18.
    {
      field: 'engagementscore',
      short: ['10', '3', '2.5', '2147483648', '1e18'],
      pad: number,
      IN: ['c1', 'c4'],
      NIN: ['c2', 'c5', 'c6'],
      array: 'integer[]',
    },
    {
      field: 'name',
      short: ['Ann Co', 'Fay Co'],
      pad: text,
      IN: ['c1', 'c6'],
      NIN: ['c2', 'c4', 'c5'],
      array: 'text[]',
    },
    {
      field: 'plan',
      short: ['basic'],
      pad: text,
      IN: ['c2', 'c6'],
      NIN: ['c1', 'c4', 'c5'],
      array: 'jsonb[]',
    },
    {
      field: 'seats',
      short: ['1', '5.0'],
      pad: number,
      IN: ['c2', 'c5'],
      NIN: ['c1', 'c4', 'c6'],
      array: 'jsonb[]',
    },
    {
      field: 'renewal_date',
      short: ['2026-02-01'],
      pad: day,
      IN: ['c4'],
      NIN: ['c1', 'c2', 'c5', 'c6'],
      array: 'jsonb[]',
    },
    {
      field: 'logins',
      short: ['2.50'],
      pad: number,
      IN: ['c2'],
      NIN: ['c1', 'c4', 'c5', 'c6'],
      array: 'jsonb[]',
    },
    {
      entity: 'contact',
      field: 'customer_external_id',
      short: ['c1', 'c3'],
      pad: text,
      IN: ['p1', 'p3'],
      NIN: ['p2'],
      array: 'text[]',
    },
  ]
  // Every condition of a plan, as EXPLAIN prints it.
  const conditions = (plan: Awaited<ReturnType<typeof db.plan>>) =>
    planNodes(plan).flatMap(({ node }) =>
      ['Filter', 'Index Cond', 'Recheck Cond', 'Join Filter', 'Hash Cond'].flatMap(
        (k) => node[k] ?? [],
      ),
    ) as string[]
  for (const c of cases) {
    const entity = c.entity ?? 'customer'
    test(`${entity} ${c.field}: 1,000 values match what the short list does, through one constant array`, async () => {
      const long = [
        ...c.short,
        ...Array.from({ length: 1000 - c.short.length }, (_, i) => c.pad(i)),
      ]
      for (const op of ['IN', 'NIN'] as const) {
        const over = (values: string[]) =>
          input({
            entity,
            catalog: entity === 'customer' ? catalog : [],
            filters: [{ propertyName: c.field, operator: op, values }],
          })
        assert.deepEqual(await db.ids(compileSearch(over(c.short))), c[op], `${op}, short`)
        assert.deepEqual(await db.ids(compileSearch(over(long))), c[op], `${op}, 1,000 values`)
        const text = conditions(await db.plan(compileCount(over(long), false))).join(' / ')
        // A name list ANDed in is also read by the index from a subquery of the same parameter (an
        // InitPlan's output: `(InitPlan 1).col1` from PostgreSQL 17, `$0` before).
        const subquery = / ANY \((\(InitPlan \d+\)\.col\d+|\$\d+)\)/g
        const reads = [...text.matchAll(subquery)].length
        const short = text.replace(/'\{[^']*\}'/g, "'{...}'")
        assert.equal(
          reads,
          c.field === 'name' && op === 'IN' ? 1 : 0,
          `${op}: the subquery's list in ${short}`,
        )
        const lists = [...text.replace(subquery, '').matchAll(/ANY \((.{0,20})/g)].map((m) => m[1])
        assert.equal(lists.length, 1, `${op}: one list in ${text.slice(0, 300)}`)
        assert.match(lists[0], /^'\{/, `${op}: the list is a constant array, not ${lists[0]}`)
        const types = [...text.matchAll(/ANY \('\{(?:[^']|'')*\}'::([a-z ]+\[\])\)/g)].map(
          (m) => m[1],
        )
        assert.deepEqual(types, [c.array], `${op}: the array's type`)
        assert.doesNotMatch(text, / OR /, `${op}: no comparison per value`)
      }
    })
  }
  // A score no record can hold would still count in the planner's estimate of the list.
  test('a score list holds only the values within the range of scores', async () => {
    const values = [
      '10',
      '-100',
      '100',
      '101',
      '-101',
      '5000',
      ...Array.from({ length: 994 }, (_, i) => number(i)),
    ]
    const listed = (list: string[]) =>
      input({
        catalog,
        filters: [{ propertyName: 'engagementscore', operator: 'IN', values: list }],
      })
    const over = listed(values)
    assert.deepEqual(
      await db.ids(compileSearch(over)),
      await db.ids(compileSearch(listed(['10', '-100', '100']))),
    )
    const text = conditions(await db.plan(compileCount(over, false))).join(' / ')
    assert.match(text, /ANY \('\{10,-100,100\}'::integer\[\]\)/, text.slice(0, 300))
  })
  // A name list ANDed into a statement is also read from a subquery, for the index; inside an OR
  // (once NOTs are pushed down) it is the constant alone. Either way 1,000 names match what 2 do.
  test('a name list of 1,000 values matches what the short list does anywhere in a tree', async () => {
    const names = (operator: string, values: string[]): Filter => ({
      propertyName: 'name',
      operator,
      values,
    })
    const short = ['Ann Co', 'Fay Co']
    const long = [...short, ...Array.from({ length: 998 }, (_, i) => text(i))]
    const [sso, seats] = [leaf('sso', 'EQ', 'true'), leaf('seats', 'GT', '2')]
    // Each tree, with the number of its subqueries in the count: one where the list is ANDed in.
    const trees: [(list: string[]) => Condition, number][] = [
      [(list) => names('IN', list), 1],
      [(list) => ({ and: [names('IN', list), sso] }), 1],
      [(list) => ({ or: [names('IN', list), seats] }), 0],
      [(list) => ({ not: { or: [names('NIN', list), sso] } }), 1],
      [(list) => ({ not: { and: [names('IN', list), sso] } }), 0],
      [(list) => ({ not: names('IN', list) }), 0],
    ]
    assert.deepEqual(await found({ where: names('IN', long) }), ['c1', 'c6'])
    for (const [tree, subqueries] of trees) {
      const [a, b] = [input({ where: tree(short) }), input({ where: tree(long) })]
      const label = JSON.stringify(tree(['...']))
      assert.deepEqual(await db.ids(compileSearch(b)), await db.ids(compileSearch(a)), label)
      const counts = await Promise.all(
        [a, b].map(async (x) => (await db.rows(compileCount(x, false)))[0].total),
      )
      assert.equal(counts[1], counts[0], label)
      assert.equal(
        compileCount(b, false).text.match(/\(select \$/g)?.length ?? 0,
        subqueries,
        label,
      )
      // On Citus each statement, its subquery with it, is one router task on the account's shard.
      for (const query of [compileSearch(b), compileCount(b, false)]) {
        const jobs = planNodes(await db.plan(query)).flatMap(({ node }) => {
          const job = (node['Distributed Query'] as { Job?: { 'Task Count'?: number } } | undefined)
            ?.Job
          return job ? [job['Task Count']] : []
        })
        assert.deepEqual(jobs, clusterFromEnv() ? [1] : [], `${label}: tasks`)
      }
    }
  })
})

const leaf = (propertyName: string, operator: string, value?: string): Filter => ({
  propertyName,
  operator,
  ...(value !== undefined && { value }),
})

describe('compileSearch: where trees', () => {
  const seats = leaf('seats', 'GT', '2')
  const plan = leaf('plan', 'EQ', 'pro')

  test('filters are an AND node: the same tree under where compiles to the same SQL', () => {
    for (const [entity, filters] of [
      ['customer', [seats, plan, leaf('tags', 'KNOWN')]],
      ['contact', [leaf('customer_external_id', 'NEQ', 'c1'), leaf('role', 'LIKE', 'a')]],
      ['customer', [leaf('is_churned', 'EQ', 'true')]],
    ] as const) {
      const catalogOf =
        entity === 'contact'
          ? [{ codename: 'role', kind: 'attribute', type: 'string' } as const]
          : catalog
      const plain = compileSearch(input({ entity, catalog: catalogOf, filters }))
      assert.deepEqual(
        compileSearch(input({ entity, catalog: catalogOf, where: { and: filters } })),
        plain,
      )
      // Nested ANDs at the top flatten too.
      const nested = { and: [filters[0], { and: filters.slice(1) }] }
      assert.deepEqual(compileSearch(input({ entity, catalog: catalogOf, where: nested })), plain)
    }
  })

  // Sorted, so that a top-level OR stays one condition (an unsorted page reads its groups apart).
  const sorted = (where: Condition) =>
    compileSearch(input({ where, sort: [{ propertyName: 'upsell_score', direction: 'desc' }] }))

  test('or, and and not nest in parentheses; NOT is pushed down to the criteria', async () => {
    const ids = async (where: Condition) => (await db.ids(sorted(where))).sort()
    // The same query, compiled from either tree.
    const text = (where: Condition) => [sorted(where).text, sorted(where).params]
    const sso = leaf('sso', 'EQ', 'true')
    assert.deepEqual(await ids({ or: [seats, { and: [plan, { not: sso }] }] }), ['c1', 'c5'])
    // NOT of a criterion is its negative operator, which holds where the positive one is unknown.
    assert.deepEqual(await ids({ not: seats }), ['c2', 'c4', 'c6'])
    assert.deepEqual(text({ not: leaf('seats', 'NEQ', '2') }), text(leaf('seats', 'EQ', '2')))
    assert.deepEqual(text({ not: { not: { or: [seats, plan] } } }), text({ or: [seats, plan] }))
    // De Morgan: NOT of an OR is the AND of the negations.
    assert.deepEqual(await ids({ not: { or: [plan, { not: sso }] } }), ['c6'])
  })

  test('the churn default: off when any leaf anywhere names is_churned, even under OR and NOT', async () => {
    const churnParams = (where: Condition) =>
      compileSearch(input({ where })).params.filter((p) => p === 'false')
    assert.deepEqual(churnParams({ or: [seats, plan] }), ['false'])
    assert.deepEqual(churnParams(seats), ['false'])
    assert.deepEqual(churnParams({ or: [seats, leaf('is_churned', 'EQ', 'true')] }), [])
    assert.deepEqual(
      churnParams({ not: { and: [plan, { not: leaf('is_churned', 'KNOWN') }] } }),
      [],
    )
    // c3, churned, has plan pro.
    assert.deepEqual((await db.ids(sorted({ or: [seats, plan] }))).sort(), ['c1', 'c5'])
    assert.deepEqual(
      (await found({ where: { or: [plan, leaf('is_churned', 'EQ', 'true')] } })).sort(),
      ['c1', 'c3', 'c5'],
    )
  })

  test('the joins follow the leaves anywhere in the tree', async () => {
    const deep = { or: [plan, { not: { and: [seats, leaf('engagementscore', 'LT', '5')] } }] }
    assert.ok((await readUnderLimit({ where: deep }, 'customer_scores')).includes(true))
    assert.deepEqual(await readUnderLimit({ where: { or: [plan, seats] } }, 'customer_scores'), [
      false,
    ])
  })

  const unionTitle =
    'an unsorted page reads the groups of a top-level OR apart, each cut to the page, then their union'
  test(unionTitle, async () => {
    const where = { and: [{ or: [plan, seats] }, leaf('sso', 'EQ', 'true')] }
    const limits = planNodes(await db.plan(compileSearch(input({ where })))).filter(
      ({ node, above }) =>
        node['Node Type'] === 'Limit' && above.some((type) => type.endsWith('Append')),
    )
    assert.equal(limits.length, 2)
    // Each group keeps every other condition (sso, the churn default: c3 has plan pro and sso).
    assert.deepEqual(await found({ where }), ['c1'])
    assert.deepEqual(await found({ where: { or: [plan, seats] }, limit: 2 }), ['c1', 'c5'])
  })

  test('errors name their path in the tree, every one at once', () => {
    const where = {
      or: [
        leaf('seats', 'EQ', '1'),
        { and: [leaf('seats', 'LIKE', 'x'), { not: leaf('nope', 'EQ', '1') }] },
        leaf('renewal_date', 'GT', 'soon'),
      ],
    }
    assert.deepEqual(pathsOf({ where }), [
      '/where/or/1/and/0/operator',
      '/where/or/1/and/1/not/propertyName',
      '/where/or/2/value',
    ])
    const [error] = errorsOf({
      entity: 'contact',
      where: { or: [plan, { and: [leaf('owner', 'KNOWN')] }] },
    })
    assert.deepEqual(error, {
      path: '/where/or/1/and/0/propertyName',
      message: 'owner is a customer-only field',
    })
    assert.deepEqual(
      pathsOf({ entity: 'contact', where: { not: leaf('is_churned', 'EQ', 'true') } }),
      ['/where/not/propertyName'],
    )
  })

  test('contextNeeds reads the leaves of a tree', () => {
    const where = {
      or: [leaf('owner', 'EQ', 'a@x.io'), { not: { and: [leaf('tags', 'IN', 'red'), seats] } }],
    }
    assert.deepEqual(contextNeeds('customer', { where }), {
      catalog: true,
      emails: ['a@x.io'],
      titles: ['red'],
    })
    assert.deepEqual(
      contextNeeds('customer', { where: { not: leaf('name', 'KNOWN') } }).catalog,
      false,
    )
  })
})

describe('compileCount', () => {
  test('counts what the page query matches, paging aside', async () => {
    const over = {
      where: { not: { and: [leaf('seats', 'LTE', '2'), leaf('engagementscore', 'GTE', '5')] } },
    }
    const page = await found(over)
    assert.deepEqual(page, ['c1', 'c4', 'c5', 'c6'])
    const count = compileCount(
      input({ ...over, limit: 1, afterServiceId: await db.serviceId('customers', 'c4') }),
      false,
    )
    assert.deepEqual([...(await db.rows(count))], [{ total: page.length }])
    const [estimate] = await db.rows(compileCount(input(over), true))
    assert.equal(typeof estimate['QUERY PLAN'][0].Plan['Plan Rows'], 'number')
  })
  test('refuses what compileSearch refuses', () => {
    assert.throws(() => compileCount(input({ filters: [leaf('nope', 'KNOWN')] }), false), Refusal)
  })
})

describe('checkSearch', () => {
  test('checks a search once: its problems, or a search that compiles without being checked again', async () => {
    const over = {
      filters: [leaf('logins', 'GT', '3'), leaf('seats', 'LTE', '5')],
      properties: ['plan'],
    }
    const { search, problems } = checkSearch(input(over))
    assert.equal(problems, undefined)
    assert.ok(search)
    assert.deepEqual(compileSearch(search), compileSearch(input(over)))
    assert.deepEqual(compileCount(search, false), compileCount(input(over), false))
    assert.deepEqual(await found(over), await db.ids(compileSearch(search)))
    // The catalog is not read again: with it emptied after the check, the same query comes out,
    // where the input itself is now refused.
    const emptied = { ...search, input: { ...search.input, catalog: [] } }
    assert.deepEqual(compileSearch(emptied), compileSearch(search))
    assert.throws(() => compileSearch(emptied.input), Refusal)
    const refused = checkSearch(input({ filters: [leaf('nope', 'KNOWN')], properties: ['nada'] }))
    assert.equal(refused.search, undefined)
    assert.deepEqual(
      refused.problems?.map((p) => p.path),
      ['/filters/0/propertyName', '/properties/0'],
    )
  })
})

// ---------------------------------------------------------------------------------------------
// evaluate.ts

function rec(external_id: string, over: Partial<SearchRecord> = {}): SearchRecord {
  return { external_id, is_churned: false, tags: [], attributes: {}, metrics: {}, ...over }
}

function ids(
  records: SearchRecord[],
  filters: Filter[],
  entity: SearchInput['entity'] = 'customer',
  cat = catalog,
): string[] {
  return records
    .filter((r) => matches(r, { filters }, cat, TODAY, entity))
    .map((r) => r.external_id)
}

function one(propertyName: string, operator: string, value?: string | string[]): Filter[] {
  return [
    Array.isArray(value)
      ? { propertyName, operator, values: value }
      : { propertyName, operator, value },
  ]
}

describe('matches: numbers', () => {
  const records = [
    rec('ten', { fitscore: 10, attributes: { seats: 10 }, metrics: { logins: 10 } }),
    rec('twenty', { fitscore: 20, attributes: { seats: 20 }, metrics: { logins: 20 } }),
    rec('none'),
    rec('text', { attributes: { seats: '10' }, metrics: { logins: '10' } }),
  ]
  for (const field of ['fitscore', 'seats', 'logins']) {
    test(field, () => {
      // 'text' holds a JSON string in a number property: no number value, like 'none'.
      const missing = ['none', 'text']
      assert.deepEqual(ids(records, one(field, 'EQ', '10.0')), ['ten'])
      assert.deepEqual(ids(records, one(field, 'NEQ', '10')), ['twenty', ...missing])
      assert.deepEqual(ids(records, one(field, 'LT', '20')), ['ten'])
      assert.deepEqual(ids(records, one(field, 'LTE', '20')), ['ten', 'twenty'])
      assert.deepEqual(ids(records, one(field, 'GT', '1e1')), ['twenty'])
      assert.deepEqual(ids(records, one(field, 'GTE', '-5')), ['ten', 'twenty'])
      assert.deepEqual(ids(records, one(field, 'IN', ['20', '30'])), ['twenty'])
      assert.deepEqual(ids(records, one(field, 'NIN', ['20', '30'])), ['ten', ...missing])
      assert.deepEqual(ids(records, one(field, 'KNOWN')), ['ten', 'twenty'])
      assert.deepEqual(ids(records, one(field, 'UNKNOWN')), missing)
    })
  }
  test('zero is a known value', () => {
    assert.deepEqual(ids([rec('zero', { churn_risk: 0 })], one('churn_risk', 'KNOWN')), ['zero'])
  })
})

describe('matches: dates', () => {
  const records = [
    rec('today', { last_seen: '2026-11-21', attributes: { renewal_date: '2026-11-21' } }),
    rec('d10', { last_seen: '2026-11-11', attributes: { renewal_date: '2026-11-11' } }),
    rec('d20', { last_seen: '2026-11-01', attributes: { renewal_date: '2026-11-01' } }),
    rec('future', { last_seen: '2026-12-01', attributes: { renewal_date: '2026-12-01' } }),
    rec('none', { attributes: { renewal_date: '2026-02-30' } }),
  ]
  for (const field of ['last_seen', 'renewal_date']) {
    test(field, () => {
      assert.deepEqual(ids(records, one(field, 'EQ', '2026-11-11')), ['d10'])
      assert.deepEqual(ids(records, one(field, 'NEQ', '2026-11-11')), [
        'today',
        'd20',
        'future',
        'none',
      ])
      assert.deepEqual(ids(records, one(field, 'LT', '2026-11-11')), ['d20'])
      assert.deepEqual(ids(records, one(field, 'LTE', '2026-11-11')), ['d10', 'd20'])
      assert.deepEqual(ids(records, one(field, 'GT', '2026-11-21')), ['future'])
      assert.deepEqual(ids(records, one(field, 'GTE', '2026-11-21')), ['today', 'future'])
      assert.deepEqual(ids(records, one(field, 'IN', ['2026-11-01', '2026-12-01'])), [
        'd20',
        'future',
      ])
      assert.deepEqual(ids(records, one(field, 'NIN', ['2026-11-01', '2026-12-01'])), [
        'today',
        'd10',
        'none',
      ])
      assert.deepEqual(ids(records, one(field, 'KNOWN')), ['today', 'd10', 'd20', 'future'])
      assert.deepEqual(ids(records, one(field, 'UNKNOWN')), ['none'])
      // GTD N: before today - N; LTD N: after today - N, up to today (the future is excluded).
      assert.deepEqual(ids(records, one(field, 'GTD', '10')), ['d20'])
      assert.deepEqual(ids(records, one(field, 'GTD', '9')), ['d10', 'd20'])
      assert.deepEqual(ids(records, one(field, 'GTD', '0')), ['d10', 'd20'])
      assert.deepEqual(ids(records, one(field, 'LTD', '10')), ['today'])
      assert.deepEqual(ids(records, one(field, 'LTD', '11')), ['today', 'd10'])
      assert.deepEqual(ids(records, one(field, 'LTD', '0')), [])
    })
  }
})

describe('matches: strings', () => {
  const records = [
    rec('corp', { name: 'Acme Corp', attributes: { plan: 'Acme Corp' } }),
    rec('acme', { name: 'acme', attributes: { plan: 'acme' } }),
    rec('odd', { name: '100%_off\\', attributes: { plan: '100%_off\\' } }),
    rec('empty', { name: '', attributes: { plan: '' } }),
    rec('none', { name: null, attributes: { plan: 5 } }),
  ]
  for (const field of ['name', 'plan']) {
    test(field, () => {
      assert.deepEqual(ids(records, one(field, 'EQ', 'acme')), ['acme'])
      assert.deepEqual(ids(records, one(field, 'EQ', 'ACME')), [])
      assert.deepEqual(ids(records, one(field, 'NEQ', 'acme')), ['corp', 'odd', 'empty', 'none'])
      assert.deepEqual(ids(records, one(field, 'IN', ['acme', 'Acme Corp', 'x'])), ['corp', 'acme'])
      assert.deepEqual(ids(records, one(field, 'NIN', ['acme', 'Acme Corp'])), [
        'odd',
        'empty',
        'none',
      ])
      assert.deepEqual(ids(records, one(field, 'LIKE', 'ACME')), ['corp', 'acme'])
      assert.deepEqual(ids(records, one(field, 'LIKE', 'e c')), ['corp'])
      assert.deepEqual(ids(records, one(field, 'LIKE', '%')), ['odd'])
      assert.deepEqual(ids(records, one(field, 'LIKE', '_')), ['odd'])
      assert.deepEqual(ids(records, one(field, 'LIKE', '\\')), ['odd'])
      assert.deepEqual(ids(records, one(field, 'LIKE', '')), ['corp', 'acme', 'odd', 'empty'])
      assert.deepEqual(ids(records, one(field, 'NLIKE', 'acme')), ['odd', 'empty', 'none'])
      assert.deepEqual(ids(records, one(field, 'KNOWN')), ['corp', 'acme', 'odd'])
      assert.deepEqual(ids(records, one(field, 'UNKNOWN')), ['empty', 'none'])
    })
  }
})

describe('matches: booleans', () => {
  const records = [
    rec('yes', { attributes: { sso: true } }),
    rec('no', { attributes: { sso: false } }),
    rec('none'),
    rec('text', { attributes: { sso: 'true' } }),
  ]
  test('sso', () => {
    assert.deepEqual(ids(records, one('sso', 'EQ', 'true')), ['yes'])
    assert.deepEqual(ids(records, one('sso', 'EQ', 'false')), ['no'])
    assert.deepEqual(ids(records, one('sso', 'NEQ', 'true')), ['no', 'none', 'text'])
    assert.deepEqual(ids(records, one('sso', 'KNOWN')), ['yes', 'no'])
    assert.deepEqual(ids(records, one('sso', 'UNKNOWN')), ['none', 'text'])
  })
})

describe('matches: owner and tags', () => {
  const records = [
    rec('ann', { owner_email: 'Ann@X.io', tags: ['Red', 'blue'] }),
    rec('bob', { owner_email: 'bob@x.io', tags: ['blue'] }),
    rec('nobody', { owner_email: null, tags: [] }),
  ]
  test('owner emails match case-insensitively', () => {
    assert.deepEqual(ids(records, one('owner', 'EQ', 'ann@x.IO')), ['ann'])
    assert.deepEqual(ids(records, one('owner', 'NEQ', 'ann@x.io')), ['bob', 'nobody'])
    assert.deepEqual(ids(records, one('owner', 'IN', ['BOB@X.IO', 'zed@x.io'])), ['bob'])
    assert.deepEqual(ids(records, one('owner', 'NIN', ['BOB@X.IO'])), ['ann', 'nobody'])
    assert.deepEqual(ids(records, one('owner', 'EQ', 'zed@x.io')), [])
    assert.deepEqual(ids(records, one('owner', 'NIN', ['zed@x.io'])), ['ann', 'bob', 'nobody'])
    assert.deepEqual(ids(records, one('owner', 'KNOWN')), ['ann', 'bob'])
    assert.deepEqual(ids(records, one('owner', 'UNKNOWN')), ['nobody'])
  })
  test('tags match any listed title case-insensitively', () => {
    assert.deepEqual(ids(records, one('tags', 'EQ', 'RED')), ['ann'])
    assert.deepEqual(ids(records, one('tags', 'NEQ', 'red')), ['bob', 'nobody'])
    assert.deepEqual(ids(records, one('tags', 'IN', ['BLUE', 'green'])), ['ann', 'bob'])
    assert.deepEqual(ids(records, one('tags', 'NIN', ['red', 'green'])), ['bob', 'nobody'])
    assert.deepEqual(ids(records, one('tags', 'IN', ['green'])), [])
    assert.deepEqual(ids(records, one('tags', 'KNOWN')), ['ann', 'bob'])
    assert.deepEqual(ids(records, one('tags', 'UNKNOWN')), ['nobody'])
    assert.deepEqual(ids(records, one('tags', 'IN', ['blue']), 'contact'), ['ann', 'bob'])
  })
})

describe('matches: contacts', () => {
  const records = [
    rec('k1', { customer_external_id: 'c1', is_churned: true }),
    rec('k2', { customer_external_id: 'c2' }),
    rec('k3', { customer_external_id: 'C1' }),
  ]
  test('customer_external_id is exact and case-sensitive; churned customers are included', () => {
    assert.deepEqual(ids(records, one('customer_external_id', 'EQ', 'c1'), 'contact'), ['k1'])
    assert.deepEqual(ids(records, one('customer_external_id', 'NEQ', 'c1'), 'contact'), [
      'k2',
      'k3',
    ])
    assert.deepEqual(ids(records, one('customer_external_id', 'IN', ['C1', 'c2']), 'contact'), [
      'k2',
      'k3',
    ])
    assert.deepEqual(ids(records, one('customer_external_id', 'NIN', ['C1', 'c2']), 'contact'), [
      'k1',
    ])
    assert.deepEqual(ids(records, [], 'contact'), ['k1', 'k2', 'k3'])
  })
  test('customer-only fields are rejected like the compiler does', () => {
    assert.throws(() => ids(records, one('owner', 'KNOWN'), 'contact'), Refusal)
  })
})

describe('matches: churn default and combination', () => {
  const records = [
    rec('active', { fitscore: 5 }),
    rec('churned', { is_churned: true, fitscore: 5 }),
  ]
  test('is_churned', () => {
    assert.deepEqual(ids(records, []), ['active'])
    assert.deepEqual(ids(records, one('is_churned', 'EQ', 'true')), ['churned'])
    assert.deepEqual(ids(records, one('is_churned', 'EQ', 'false')), ['active'])
    assert.deepEqual(ids(records, one('is_churned', 'NEQ', 'true')), ['active'])
    assert.deepEqual(ids(records, one('is_churned', 'KNOWN')), ['active', 'churned'])
  })
  test('filters combine with AND', () => {
    const filters: Filter[] = [
      { propertyName: 'fitscore', operator: 'EQ', value: '5' },
      { propertyName: 'is_churned', operator: 'NEQ', value: 'false' },
    ]
    assert.deepEqual(ids(records, filters), ['churned'])
  })
  test('invalid filters throw the compiler error', () => {
    assert.throws(
      () => ids(records, one('seats', 'LIKE', 'x')),
      (e) => e instanceof Refusal && e.errors?.[0].path === '/filters/0/operator',
    )
  })
})

describe('matches: where trees', () => {
  const records = [
    rec('a', { fitscore: 5, tags: ['Red'] }),
    rec('b', { fitscore: 9 }),
    rec('c', { is_churned: true, fitscore: 5 }),
    rec('d', { tags: ['blue'] }),
  ]
  const treeIds = (where: Condition) =>
    records
      .filter((r) => matches(r, { where }, catalog, TODAY, 'customer'))
      .map((r) => r.external_id)
  test('and, or and not as they read, with the churn default', () => {
    const five = leaf('fitscore', 'EQ', '5')
    const red = leaf('tags', 'EQ', 'red')
    assert.deepEqual(treeIds(five), ['a'])
    assert.deepEqual(treeIds({ or: [five, leaf('tags', 'KNOWN')] }), ['a', 'd'])
    assert.deepEqual(treeIds({ and: [five, red] }), ['a'])
    // fitscore GT 6 is unknown for d (no value): NOT of it holds, as for NEQ and the like.
    assert.deepEqual(treeIds({ not: leaf('fitscore', 'GT', '6') }), ['a', 'd'])
    assert.deepEqual(treeIds({ not: { or: [five, red] } }), ['b', 'd'])
    assert.deepEqual(treeIds({ or: [five, leaf('is_churned', 'EQ', 'true')] }), ['a', 'c'])
    assert.deepEqual(treeIds({ not: { not: leaf('is_churned', 'KNOWN') } }), ['a', 'b', 'c', 'd'])
  })
  test('invalid leaves throw the compiler error with their path', () => {
    assert.throws(
      () => treeIds({ or: [leaf('fitscore', 'KNOWN'), { not: leaf('seats', 'LIKE', 'x') }] }),
      (e) => e instanceof Refusal && e.errors?.[0].path === '/where/or/1/not/operator',
    )
  })
})

describe('matches: negative operators are exact complements', () => {
  const valueArb = fc.oneof(
    fc.constantFrom(
      null,
      '',
      'a',
      'A',
      '%',
      'ab',
      true,
      false,
      0,
      1,
      2.5,
      '2026-11-01',
      '2026-11-21',
      '2026-02-30',
    ),
    fc.string(),
    fc.double({ noNaN: true }),
  )
  const recordArb = fc.record({
    name: valueArb,
    fitscore: valueArb,
    last_seen: valueArb,
    owner_email: fc.constantFrom(null, 'a@x.io', 'B@x.io'),
    tags: fc.subarray(['Red', 'blue']),
    attributes: fc.record(
      { plan: valueArb, seats: valueArb, sso: valueArb, renewal_date: valueArb },
      { requiredKeys: [] },
    ),
  })
  const pairs: [string, string, string, string | string[] | undefined][] = [
    ['fitscore', 'EQ', 'NEQ', '1'],
    ['seats', 'IN', 'NIN', ['0', '2.5']],
    ['name', 'LIKE', 'NLIKE', 'a'],
    ['plan', 'EQ', 'NEQ', 'a'],
    ['plan', 'KNOWN', 'UNKNOWN', undefined],
    ['sso', 'EQ', 'NEQ', 'true'],
    ['sso', 'KNOWN', 'UNKNOWN', undefined],
    ['renewal_date', 'IN', 'NIN', ['2026-11-01']],
    ['last_seen', 'KNOWN', 'UNKNOWN', undefined],
    ['owner', 'IN', 'NIN', ['A@X.IO']],
    ['owner', 'KNOWN', 'UNKNOWN', undefined],
    ['tags', 'EQ', 'NEQ', 'red'],
    ['tags', 'KNOWN', 'UNKNOWN', undefined],
  ]
  test('for every record, exactly one of P and not-P matches', () => {
    fc.assert(
      fc.property(recordArb, fc.constantFrom(...pairs), (r, [field, pos, neg, value]) => {
        const record = rec('r', r as Partial<SearchRecord>)
        const hit = matches(record, { filters: one(field, pos, value) }, catalog, TODAY, 'customer')
        const miss = matches(
          record,
          { filters: one(field, neg, value) },
          catalog,
          TODAY,
          'customer',
        )
        assert.notEqual(hit, miss)
      }),
    )
  })
})

describe('compileSearch: sort', () => {
  const key = Buffer.alloc(32, 1)
  const sort = [
    { propertyName: 'engagementscore', direction: 'desc' as const },
    { propertyName: 'plan' },
    { propertyName: 'createdAt' },
  ]
  const sorted = (over: Partial<SearchInput> = {}) =>
    compileSearch(input({ sort, cursorKey: key, ...over }))

  // Account 8's records, for sorting: ties, nulls, and strings that byte order puts apart.
  const NAMES = ['b', 'B', 'a', null]
  const PLANS = ['pro', 'Pro', 'basic', undefined]
  const SCORES = [null, 1, 1, 2, undefined, 3]
  before(async () => {
    for (let i = 0; i < 14; i++) {
      const plan = PLANS[(i * 3) % 4]
      await db.sql`insert into customers (account_id, external_id, name, attributes, created_at)
        values (8, ${`s${String(i).padStart(2, '0')}`}, ${NAMES[i % 4]},
          ${db.sql.json(plan ? { plan } : {})},
          ${`2026-01-0${1 + (i % 3)}T00:00:00Z`})`
    }
    const scored = Array.from({ length: 14 }, (_, i) => ({ i, engagementscore: SCORES[i % 6] }))
      .filter((x) => x.engagementscore !== undefined)
      .map(({ i, engagementscore }) => ({
        external_id: `s${String(i).padStart(2, '0')}`,
        engagementscore,
      }))
    await storeScores(db.sql, 'customers', 8, scored)
  })
  type Key = { propertyName: string; direction?: 'asc' | 'desc' }
  // The order the sort means, computed here: each key with nulls last, strings in byte order, then
  // the external ID.
  const expected = async (keys: Key[]) => {
    const records = await db.sql`select r.external_id, r.name, r.attributes->>'plan' as plan,
        r.created_at::text as created, h.engagementscore
      from customers r left join customer_scores h on h.account_id = r.account_id
        and h.customer_id = r.service_id
      where r.account_id = 8 and not r.is_churned`
    const column: Record<string, string> = {
      engagementscore: 'engagementscore',
      plan: 'plan',
      name: 'name',
    }
    const compare = (x: unknown, y: unknown) =>
      typeof x === 'number'
        ? x - (y as number)
        : Buffer.compare(Buffer.from(String(x)), Buffer.from(String(y)))
    return [...records]
      .sort((r, q) => {
        for (const { propertyName, direction } of keys) {
          const [x, y] = [
            r[column[propertyName] ?? 'created'],
            q[column[propertyName] ?? 'created'],
          ]
          if (x === null || y === null) {
            if (x !== y) return x === null ? 1 : -1
            continue
          }
          const c = compare(x, y) * (direction === 'desc' ? -1 : 1)
          if (c !== 0) return c
        }
        return compare(r.external_id, q.external_id)
      })
      .map((r) => r.external_id as string)
  }
  // Every page in turn, each after the previous page's cursor.
  const walk = async (keys: Key[], limit: number) => {
    const seen: string[] = []
    for (let afterCursor: string | undefined; ; ) {
      const query = compileSearch(
        input({ accountId: 8, sort: keys, cursorKey: key, limit, afterCursor }),
      )
      const rows = await db.rows(query)
      seen.push(...rows.slice(0, limit).map((r) => r.id as string))
      // A cursor that does not move on would walk forever: fail on the second lap instead.
      if (rows.length <= limit || seen.length > 30) return seen
      afterCursor = query.next!(rows[limit - 1].cursor)
    }
  }
  // The parts of the page's union all: 1 when the page is one query.
  const parts = async (query: { text: string; params: unknown[] }) => {
    const append = planNodes(await db.plan(query)).find(({ node }) =>
      node['Node Type'].endsWith('Append'),
    )
    return append
      ? append.node.Plans!.filter((p) => p['Parent Relationship'] === 'Member').length
      : 1
  }

  const orderTitle =
    'keys in order, nulls last, strings in byte order, the external ID last; the page joins what keys read'
  test(orderTitle, async () => {
    for (const keys of [
      sort,
      sort.slice(1),
      [{ propertyName: 'name', direction: 'desc' as const }, ...sort.slice(1)],
    ]) {
      const order = await expected(keys)
      assert.equal(order.length, 15)
      assert.deepEqual(
        await db.ids(compileSearch(input({ accountId: 8, sort: keys, cursorKey: key }))),
        order,
      )
    }
    // A score key is read in the page's own query; a key of the record alone is not.
    assert.ok((await readUnderLimit({ sort, cursorKey: key }, 'customer_scores')).includes(true))
    assert.deepEqual(
      await readUnderLimit({ sort: sort.slice(1), cursorKey: key }, 'customer_scores'),
      [false],
    )
  })

  test('a cursor becomes the keyset condition, key by key, a null value included', async () => {
    const keys = resolveSort('customer', sort, new Map(catalog.map((d) => [d.codename, d])), [])
    const scope = cursorScope(7, 'customer', keys)
    const cursor = sealCursor(['5', null, '2026-01-01T00:00:00.000001Z', 'c9'], key, scope)
    assert.deepEqual(openCursor(cursor, key, scope, 3), [
      '5',
      null,
      '2026-01-01T00:00:00.000001Z',
      'c9',
    ])
    for (const keys of [
      sort,
      sort.slice(1),
      [sort[1], { propertyName: 'name', direction: 'desc' as const }],
    ]) {
      const order = await expected(keys)
      for (const limit of [1, 2, 4])
        assert.deepEqual(await walk(keys, limit), order, `${JSON.stringify(keys)} by ${limit}`)
    }
  })

  test('one indexed key: the tie and the records beyond are index ranges; after a null, only the nulls', async () => {
    for (const propertyName of ['engagementscore', 'name', 'createdAt']) {
      for (const direction of ['asc', 'desc'] as const) {
        const keys = [{ propertyName, direction }]
        const order = await expected(keys)
        for (const limit of [1, 3])
          assert.deepEqual(await walk(keys, limit), order, `${propertyName} ${direction}`)
        // The rest of the cursor's tie; for a descending key the next two values' ties, each read
        // forwards from the index; the records beyond; those without a value.
        const scope = cursorScope(8, 'customer', resolveSort('customer', keys, new Map(), []))
        const after = (v: string | null) =>
          compileSearch(
            input({
              accountId: 8,
              sort: keys,
              cursorKey: key,
              afterCursor: sealCursor([v, 'c9'], key, scope),
            }),
          )
        const value =
          propertyName === 'createdAt'
            ? '2026-01-02T00:00:00Z'
            : propertyName === 'name'
              ? 'a'
              : '1'
        assert.equal(await parts(after(value)), direction === 'desc' ? 5 : 3)
        assert.equal(await parts(after(null)), 1)
      }
    }
  })

  test("the next cursor seals the last row's values for this search only", () => {
    const { next } = sorted()
    const cursor = next!('["5",null,"2026-01-01T00:00:00.000001Z","c9"]')
    assert.doesNotThrow(() => sorted({ afterCursor: cursor }))
    const other = [
      ['another account', { accountId: 8 }],
      ['another entity', { entity: 'contact' as const, sort: sort.slice(0, 1) }],
      ['another direction', { sort: [{ propertyName: 'engagementscore' }, ...sort.slice(1)] }],
      ['another key', { cursorKey: Buffer.alloc(32, 2) }],
      ['altered', { afterCursor: cursor.replace(/^./, (c) => (c === 'W' ? 'X' : 'W')) }],
      ['not a cursor', { afterCursor: 'nope' }],
    ] as const
    for (const [what, over] of other) {
      assert.deepEqual(
        pathsOf({ sort, cursorKey: key, afterCursor: cursor, ...over }),
        ['/after'],
        what,
      )
    }
  })

  test('refusals name their paths', () => {
    const at = (s: unknown) => pathsOf({ sort: s as typeof sort, cursorKey: key })
    assert.deepEqual(at([{ propertyName: 'tags' }, { propertyName: 'nope' }]), [
      '/sort/0/propertyName',
      '/sort/1/propertyName',
    ])
    assert.deepEqual(
      pathsOf({ entity: 'contact', sort: [{ propertyName: 'upsell_score' }], cursorKey: key }),
      ['/sort/0/propertyName'],
    )
    assert.deepEqual(pathsOf({ sort, cursorKey: key, afterServiceId: 3 }), ['/after'])
  })

  // Last in this block: it gives account 8's records probabilities (and a score row to
  // those without).
  test('a sort on the learned churn probability walks its index as the score sorts do', async () => {
    const PROBABILITIES = [0.25, null, 0.5, 0.25, 0.125, 0.75, 1 / 3]
    const bytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))
    const active =
      await db.sql`select external_id from customers where account_id = 8 and not is_churned
      order by external_id`
    const given = active.map((r, i) => ({
      external_id: r.external_id as string,
      p: PROBABILITIES[i % 7],
    }))
    await storeScores(
      db.sql,
      'customers',
      8,
      given.map(({ external_id, p }) => ({ external_id, churn_probability: p })),
    )
    for (const direction of ['asc', 'desc'] as const) {
      const keys = [{ propertyName: 'churn_probability', direction }]
      const sign = direction === 'desc' ? -1 : 1
      const order = given
        .sort((a, b) =>
          a.p === null || b.p === null
            ? Number(a.p === null) - Number(b.p === null) || bytes(a.external_id, b.external_id)
            : sign * (a.p - b.p) || bytes(a.external_id, b.external_id),
        )
        .map((g) => g.external_id)
      for (const limit of [1, 3])
        assert.deepEqual(await walk(keys, limit), order, `${direction} by ${limit}`)
      // After a cursor: the rest of its tie, (descending) the next two values' ties, the records
      // beyond and those without a value, each a range of (account_id, churn_probability,
      // external_id).
      const scope = cursorScope(8, 'customer', resolveSort('customer', keys, new Map(), []))
      const query = compileSearch(
        input({
          accountId: 8,
          sort: keys,
          cursorKey: key,
          afterCursor: sealCursor(['0.25', 's00'], key, scope),
        }),
      )
      assert.equal(await parts(query), direction === 'desc' ? 5 : 3)
      // The order is the index's: with another plan priced out, the score rows are read from it in
      // its order, none sorted.
      const nodes = await db.sql.begin(async (tx) => {
        // On Citus the shard's plan is made on its worker, which these SET LOCALs then reach too.
        await tx`set local citus.propagate_set_commands = local`
        await tx`set local enable_seqscan = off`
        await tx`set local enable_sort = off`
        await tx`set local enable_bitmapscan = off`
        const [row] = await tx.unsafe(
          `explain (format json) ${query.text}`,
          query.params as string[],
        )
        return planNodes(row['QUERY PLAN'][0].Plan)
      })
      const reads = nodes.filter(({ node }) => node['Relation Name'] === 'customer_scores')
      const walked = reads.filter(
        ({ node }) => node['Index Name'] === 'customer_scores_churn_probability',
      )
      // The tie and the records beyond; descending, also the next two values and the
      // probes finding them.
      assert.ok(
        walked.length >= (direction === 'desc' ? 6 : 2),
        `${direction}: ${walked.length} index reads`,
      )
      // Nothing read is sorted whole under its part's limit (a descending walk orders a tie's
      // external IDs by an incremental sort, as for the other scores).
      for (const { above } of reads)
        assert.ok(!above.slice(above.lastIndexOf('Limit')).includes('Sort'), `${above}`)
    }
  })
})
