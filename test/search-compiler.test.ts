import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { contextNeeds } from '../src/search/criteria.ts'
import { ALLOWED_OPERATORS, type Condition, type Filter, type PropertyDef } from '../src/search/fields.ts'
import { type FieldError, Refusal } from '../src/errors.ts'
import { compileCount, compileSearch, type SearchInput } from '../src/search/sql.ts'
import { matches, type SearchRecord } from './helpers/evaluate.ts'
import { cursorScope, openCursor, resolveSort, sealCursor } from '../src/search/sort.ts'

const TODAY = '2026-11-21'

const catalog: PropertyDef[] = [
  { codename: 'plan', kind: 'attribute', type: 'string' },
  { codename: 'seats', kind: 'attribute', type: 'number' },
  { codename: 'sso', kind: 'attribute', type: 'boolean' },
  { codename: 'renewal_date', kind: 'attribute', type: 'date' },
  { codename: 'logins', kind: 'metric', type: 'number' },
  { codename: 'a"b', kind: 'attribute', type: 'string' },
]

function input(over: Partial<SearchInput>): SearchInput {
  return { entity: 'customer', accountId: 7, limit: 100, catalog, today: TODAY, ...over } as SearchInput
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

// The page's conditions: from its where to its order.
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

function whereOf(text: string): string {
  const where = text.indexOf('\nwhere ')
  return text.slice(where, text.indexOf('\norder by', where) + 1)
}

describe('compileSearch rejects bad requests with paths', () => {
  test('unknown propertyName, including Object.prototype names', () => {
    for (const name of ['nope', 'constructor', '__proto__', 'upsell']) {
      assert.deepEqual(pathsOf({ filters: [{ propertyName: name, operator: 'EQ', value: 'x' }] }), [
        '/filters/0/propertyName',
      ])
    }
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
      ['contact', 'customer_external_id', 'KNOWN', 'customer_external_id'],
      ['contact', 'customer_external_id', 'LIKE', 'customer_external_id'],
    ]
    for (const [entity, propertyName, operator, type] of cases) {
      const [error, ...rest] = errorsOf({ entity, filters: [{ propertyName, operator, value: '1' }] })
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
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'seats', operator: 'EQ' }] }), ['/filters/0/value'])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'plan', operator: 'LIKE' }] }), ['/filters/0/value'])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'last_seen', operator: 'GTD' }] }), ['/filters/0/value'])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'seats', operator: 'IN' }] }), ['/filters/0/values'])
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'tags', operator: 'NIN', values: [] }] }), [
      '/filters/0/values',
    ])
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
    assert.deepEqual(pathsOf({ filters: [{ propertyName: 'seats', operator: 'NIN', values: ['1', 'x', '2', ''] }] }), [
      '/filters/0/values/1',
      '/filters/0/values/3',
    ])
    compileSearch(input({ filters: [{ propertyName: 'seats', operator: 'EQ', value: '-1.5e3' }] }))
    compileSearch(input({ filters: [{ propertyName: 'renewal_date', operator: 'EQ', value: '2024-02-29' }] }))
  })

  test('unknown requested property', () => {
    assert.deepEqual(pathsOf({ properties: ['plan', 'nope', 'name'] }), ['/properties/1', '/properties/2'])
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
    assert.deepEqual(paths, ['/filters/1/propertyName', '/filters/2/operator', '/filters/3/value', '/properties/0'])
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
    for (const s of [JSON.stringify({ 'a"b': nasty }), '{"a\\"b"}', '7; drop table y', TODAY, '%\\_' + nasty])
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

  test('every placeholder is a text parameter and every parameter is used', () => {
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
    const used = new Set([...text.matchAll(/\$(\d+)::text/g)].map((m) => Number(m[1])))
    assert.deepEqual(
      [...used].sort((a, b) => a - b),
      params.map((_, i) => i + 1),
    )
    assert.equal([...text.matchAll(/\$\d+(?!\d|::text)/g)].length, 0)
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

  test('paging: keyset after the external id of the after record, one extra row', () => {
    const { text, params } = compileSearch(input({ limit: 25, afterServiceId: 42 }))
    assert.match(
      text,
      new RegExp(
        /and r\.external_id > \(select a\.external_id from customers a /.source +
          /where a\.account_id = \$1::text::bigint and a\.service_id = \$(\d+)::text::bigint\)\n/.source +
          /order by r\.external_id\nlimit \$(\d+)::text::integer\n\) r left join customer_scores h /.source,
      ),
    )
    assert.equal(params.at(-1), '26')
    assert.equal(params.at(-2), '42')
    assert.match(compileSearch(input({ entity: 'contact', afterServiceId: 42 })).text, /from contacts a where/)
    assert.ok(!compileSearch(input({})).text.includes('r.external_id >'))
  })

  test('properties: all, a selection, or none', () => {
    assert.match(compileSearch(input({})).text, /r\.attributes \|\| r\.metrics as properties/)
    assert.match(compileSearch(input({ properties: [] })).text, /'\{\}'::jsonb as properties/)
    const { text, params } = compileSearch(input({ properties: ['plan', 'logins', 'plan'] }))
    assert.match(text, /where p\.key = any\(\$2::text::text\[\]\)\) as properties/)
    assert.equal(params[1], '{"plan","logins"}')
  })

  test('customer search is limited to active customers unless is_churned is filtered', () => {
    const plain = compileSearch(input({}))
    assert.match(whereOf(plain.text), /r\.is_churned = \$2::text::boolean/)
    assert.equal(plain.params[1], 'false')

    const churned = compileSearch(input({ filters: [{ propertyName: 'is_churned', operator: 'EQ', value: 'true' }] }))
    assert.equal(whereOf(churned.text).match(/is_churned/g)?.length, 1)
    assert.deepEqual(churned.params.slice(1, 2), ['true'])
    assert.ok(!churned.params.includes('false'))

    const any = compileSearch(input({ filters: [{ propertyName: 'is_churned', operator: 'KNOWN' }] }))
    assert.match(whereOf(any.text), /r\.is_churned is not null/)
    assert.ok(!any.params.includes('false'))

    assert.ok(!compileSearch(input({ entity: 'contact' })).text.includes('is_churned'))
  })

  const pageCutTitle =
    'the page is cut before the columns join the scores, which its query joins only when a filter reads them'
  test(pageCutTitle, () => {
    const plain = compileSearch(input({})).text
    assert.match(plain, /from \(select r\.\* from customers r\nwhere /)
    assert.match(
      plain,
      new RegExp(
        /\) r left join customer_scores h on h\.account_id = \$1::text::bigint /.source +
          /and h\.customer_id = r\.service_id\ncross join lateral \(select r\.external_id as id,\n/.source +
          /[^]*\) x\norder by r\.external_id$/.source,
      ),
    )
    const scored = compileSearch(
      input({ filters: [{ propertyName: 'engagementscore', operator: 'GT', value: '5' }] }),
    ).text
    assert.match(
      scored,
      /from \(select r\.\* from customers r left join customer_scores h on [^\n]*\nwhere [^)]*h\.engagementscore > /,
    )
  })

  test('contact search selects the owning customer, scoped to the account', () => {
    const { text } = compileSearch(
      input({ entity: 'contact', filters: [{ propertyName: 'customer_external_id', operator: 'EQ', value: 'c1' }] }),
    )
    // The customer is joined in the page's query, since the filter reads it, and again for the columns.
    assert.match(
      text,
      new RegExp(
        /from \(select r\.\* from contacts r left join customers oc /.source +
          /on oc\.account_id = \$1::text::bigint and oc\.service_id = r\.customer_id\n/.source,
      ),
    )
    assert.match(
      text,
      new RegExp(
        /\) r left join contact_scores h on h\.account_id = \$1::text::bigint /.source +
          /and h\.contact_id = r\.service_id /.source +
          /left join customers oc on oc\.account_id = \$1::text::bigint/.source,
      ),
    )
    assert.match(text, /oc\.external_id = \$\d+::text/)
    assert.match(text, /contact_tags x/)
    for (const column of ['customer_external_id', 'customer_service_id', '"createdAt"', '"updatedAt"'])
      assert.ok(text.includes(`as ${column}`))
  })

  test('a core field wins over a custom codename of the same name', () => {
    const shadowing: PropertyDef[] = [{ codename: 'name', kind: 'attribute', type: 'number' }]
    const { text } = compileSearch(
      input({ catalog: shadowing, filters: [{ propertyName: 'name', operator: 'LIKE', value: 'a' }] }),
    )
    assert.match(text, /lower\(r\.name\) like/)
  })

  test('owner and tags operands compile to the ids the caller looked up', () => {
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
    const where = (filters: Filter[]) => {
      const { text, params } = compileSearch(input({ filters, lookups }))
      return { where: whereOf(text), params }
    }
    const one = where([{ propertyName: 'owner', operator: 'EQ', value: 'Ann@x.io' }])
    assert.match(one.where, /r\.owner_user_id = \$2::text::bigint/)
    assert.equal(one.params[1], '3')
    const two = where([
      { propertyName: 'owner', operator: 'NIN', values: ['Ann@x.io', 'bob@x.io', 'zed@x.io', 'Ann@x.io'] },
    ])
    assert.match(two.where, /not coalesce\(r\.owner_user_id = any\(\$2::text::bigint\[\]\), false\)/)
    assert.equal(two.params[1], '{3,4}')
    assert.match(where([{ propertyName: 'owner', operator: 'IN', values: ['zed@x.io'] }]).where, /and false\n/)
    const tag = where([{ propertyName: 'tags', operator: 'EQ', value: 'red' }])
    assert.match(
      tag.where,
      new RegExp(
        /exists \(select 1 from customer_tags x where x\.account_id = \$1::text::bigint /.source +
          /and x\.tag_id = \$2::text::bigint and x\.external_id = r\.external_id\)/.source,
      ),
    )
    // Several tags, and negated ones, test the record's own tag ids (sql/021); tag conditions are
    // never null, so their negation is a plain NOT.
    const some = where([{ propertyName: 'tags', operator: 'IN', values: ['red', 'nope', 'blue', 'red'] }])
    assert.match(some.where, /r\.tag_ids && \$2::text::bigint\[\]/)
    assert.equal(some.params[1], '{8,9}')
    const neq = where([{ propertyName: 'tags', operator: 'NEQ', value: 'red' }])
    assert.match(neq.where, /not r\.tag_ids && \$2::text::bigint\[\]/)
    assert.equal(neq.params[1], '{8}')
    assert.match(where([{ propertyName: 'tags', operator: 'NEQ', value: 'nope' }]).where, /and true\n/)
    assert.match(where([{ propertyName: 'tags', operator: 'EQ', value: 'nope' }]).where, /and false\n/)
    assert.match(where([{ propertyName: 'tags', operator: 'UNKNOWN' }]).where, /and r\.tag_ids = '\{\}'\n/)
    assert.throws(
      () => compileSearch(input({ filters: [{ propertyName: 'tags', operator: 'EQ', value: 'red' }] })),
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
      { propertyName: 'tags', operator: 'NEQ', value: 'red', values: ['blue', 7 as unknown as string] },
      { propertyName: 'name', operator: 'EQ', value: 'not looked up' },
    ]
    assert.deepEqual(contextNeeds('customer', { filters }), {
      catalog: false,
      emails: ['a@x.io', 'b@x.io'],
      titles: ['red', 'blue'],
    })
    // owner is no core field of contacts: the catalog tells whether a contact property has the name.
    assert.deepEqual(contextNeeds('contact', { filters }), { catalog: true, emails: [], titles: ['red', 'blue'] })
    assert.deepEqual(contextNeeds('customer', {}), { catalog: false, emails: [], titles: [] })
    assert.equal(contextNeeds('customer', {}, []).catalog, true)
    assert.equal(
      contextNeeds('customer', { filters: [{ propertyName: 'plan', operator: 'EQ', value: 'x' }] }).catalog,
      true,
    )
  })

  test('json: each record as one JSON text beside its service_id, in the same order', () => {
    const plain = compileSearch(input({ limit: 5 }))
    const json = compileSearch(input({ limit: 5, json: true }))
    assert.equal(
      json.text,
      plain.text.replace(/^select x\.\*\n/, 'select row_to_json(x)::text as json, r.service_id\n'),
    )
    assert.deepEqual(json.params, plain.params)
  })

  test('EQ on a custom property is jsonb containment, IN one array of canonical JSON values', () => {
    const { text, params } = compileSearch(
      input({
        filters: [
          { propertyName: 'logins', operator: 'IN', values: ['1', '2.50'] },
          { propertyName: 'renewal_date', operator: 'NEQ', value: '2026-01-05' },
          { propertyName: 'plan', operator: 'EQ', value: 'pro' },
        ],
      }),
    )
    assert.match(whereOf(text), /\(r\.metrics -> \$2::text\) = any\(\$3::text::jsonb\[\]\)/)
    assert.match(whereOf(text), /not coalesce\(r\.attributes @> \$4::text::jsonb, false\)/)
    assert.deepEqual(params.slice(1, 5), ['logins', '{"1","2.5"}', '{"renewal_date":"2026-01-05"}', '{"plan":"pro"}'])
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
        entity === 'contact' ? [{ codename: 'role', kind: 'attribute', type: 'string' } as const] : catalog
      const plain = compileSearch(input({ entity, catalog: catalogOf, filters }))
      assert.deepEqual(compileSearch(input({ entity, catalog: catalogOf, where: { and: filters } })), plain)
      // Nested ANDs at the top flatten too.
      const nested = { and: [filters[0], { and: filters.slice(1) }] }
      assert.deepEqual(compileSearch(input({ entity, catalog: catalogOf, where: nested })), plain)
    }
  })

  // Sorted, so that a top-level OR stays one condition (an unsorted page reads its groups apart).
  const sorted = (where: Condition) =>
    compileSearch(input({ where, sort: [{ propertyName: 'upsell_score', direction: 'desc' }] }))

  test('or, and and not nest in parentheses; NOT is pushed down to the criteria', () => {
    const text = (where: Condition) => whereOf(sorted(where).text)
    const sso = leaf('sso', 'EQ', 'true')
    assert.match(
      text({ or: [seats, { and: [plan, { not: sso }] }] }),
      new RegExp(
        /\n  and \(\(case when [^\n]* > \$3::text::numeric /.source +
          /or \(r\.attributes @> \$4::text::jsonb and not coalesce\(r\.attributes @> \$5::text::jsonb, false\)\)\)\n/
            .source,
      ),
    )
    // NOT of a criterion is its negative operator, which holds where the positive one is unknown.
    assert.match(text({ not: seats }), /\n  and not coalesce\(\(case when [^\n]* > \$3::text::numeric, false\)\n/)
    assert.equal(text({ not: leaf('seats', 'NEQ', '2') }), text(leaf('seats', 'EQ', '2')))
    assert.equal(text({ not: { not: { or: [seats, plan] } } }), text({ or: [seats, plan] }))
    // De Morgan: NOT of an OR is the AND of the negations.
    assert.match(
      text({ not: { or: [plan, { not: sso }] } }),
      /\n  and \(not coalesce\(r\.attributes @> \$2::text::jsonb, false\) and r\.attributes @> \$3::text::jsonb\)\n/,
    )
  })

  test('the churn default: off when any leaf anywhere names is_churned, even under OR and NOT', () => {
    const churnParams = (where: Condition) => compileSearch(input({ where })).params.filter((p) => p === 'false')
    assert.deepEqual(churnParams({ or: [seats, plan] }), ['false'])
    assert.deepEqual(churnParams(seats), ['false'])
    assert.deepEqual(churnParams({ or: [seats, leaf('is_churned', 'EQ', 'true')] }), [])
    assert.deepEqual(churnParams({ not: { and: [plan, { not: leaf('is_churned', 'KNOWN') }] } }), [])
    assert.match(whereOf(sorted({ or: [seats, plan] }).text), /\)\n  and r\.is_churned = \$\d+::text::boolean\n/)
  })

  test('the joins follow the leaves anywhere in the tree', () => {
    const deep = { or: [plan, { not: { and: [seats, leaf('engagementscore', 'LT', '5')] } }] }
    assert.match(
      compileSearch(input({ where: deep })).text,
      /\(select r\.\* from customers r left join customer_scores h/,
    )
    assert.match(compileSearch(input({ where: { or: [plan, seats] } })).text, /\(select r\.\* from customers r\nwhere/)
  })

  test('an unsorted page reads the groups of a top-level OR apart, each cut to the page, then their union', () => {
    const { text } = compileSearch(input({ where: { and: [{ or: [plan, seats] }, leaf('sso', 'EQ', 'true')] } }))
    const groups = text.split('\nunion all\n')
    assert.equal(groups.length, 2)
    for (const [i, group] of groups.entries()) {
      // Each group keeps every other condition (the churn default, the AND beside the OR).
      assert.match(group, /\n  and r\.attributes @> \$2::text::jsonb\n  and r\.is_churned = \$3::text::boolean\n  and /)
      assert.match(
        group,
        i === 0
          ? /and r\.attributes @> \$4::text::jsonb\norder by r\.external_id\nlimit /
          : /numeric\norder by r\.external_id\nlimit /,
      )
    }
    assert.match(text, /^select x\.\*\nfrom \(select distinct on \(r\.external_id\) r\.\* from \(\(select r\.\* /)
    assert.match(groups[1], /\) r\norder by r\.external_id\nlimit \$\d+::text::integer\n\) r /)
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
    const [error] = errorsOf({ entity: 'contact', where: { or: [plan, { and: [leaf('owner', 'KNOWN')] }] } })
    assert.deepEqual(error, { path: '/where/or/1/and/0/propertyName', message: 'owner is a customer-only field' })
    assert.deepEqual(pathsOf({ entity: 'contact', where: { not: leaf('is_churned', 'EQ', 'true') } }), [
      '/where/not/propertyName',
    ])
  })

  test('contextNeeds reads the leaves of a tree', () => {
    const where = { or: [leaf('owner', 'EQ', 'a@x.io'), { not: { and: [leaf('tags', 'IN', 'red'), seats] } }] }
    assert.deepEqual(contextNeeds('customer', { where }), { catalog: true, emails: ['a@x.io'], titles: ['red'] })
    assert.deepEqual(contextNeeds('customer', { where: { not: leaf('name', 'KNOWN') } }).catalog, false)
  })
})

describe('compileCount', () => {
  test('counts what the page query matches, paging aside', () => {
    const over = {
      where: { not: { and: [leaf('seats', 'LTE', '2'), leaf('engagementscore', 'GTE', '5')] } },
      afterServiceId: 9,
    }
    const page = compileSearch(input(over))
    const count = compileCount(input(over), false)
    assert.match(count.text, /^select count\(\*\) as total from customers r left join customer_scores h /)
    assert.equal(whereOf(count.text), whereOf(page.text).slice(0, whereOf(count.text).length))
    assert.ok(!count.text.includes('external_id >') && !count.text.includes('limit'))
    assert.deepEqual(count.params, page.params.slice(0, count.params.length))
    const estimate = compileCount(input(over), true)
    assert.equal(estimate.text, count.text.replace('select count(*) as total', 'explain (format json) select 1'))
  })
  test('refuses what compileSearch refuses', () => {
    assert.throws(() => compileCount(input({ filters: [leaf('nope', 'KNOWN')] }), false), Refusal)
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
  return records.filter((r) => matches(r, { filters }, cat, TODAY, entity)).map((r) => r.external_id)
}

function one(propertyName: string, operator: string, value?: string | string[]): Filter[] {
  return [Array.isArray(value) ? { propertyName, operator, values: value } : { propertyName, operator, value }]
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
      assert.deepEqual(ids(records, one(field, 'NEQ', '2026-11-11')), ['today', 'd20', 'future', 'none'])
      assert.deepEqual(ids(records, one(field, 'LT', '2026-11-11')), ['d20'])
      assert.deepEqual(ids(records, one(field, 'LTE', '2026-11-11')), ['d10', 'd20'])
      assert.deepEqual(ids(records, one(field, 'GT', '2026-11-21')), ['future'])
      assert.deepEqual(ids(records, one(field, 'GTE', '2026-11-21')), ['today', 'future'])
      assert.deepEqual(ids(records, one(field, 'IN', ['2026-11-01', '2026-12-01'])), ['d20', 'future'])
      assert.deepEqual(ids(records, one(field, 'NIN', ['2026-11-01', '2026-12-01'])), ['today', 'd10', 'none'])
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
      assert.deepEqual(ids(records, one(field, 'NIN', ['acme', 'Acme Corp'])), ['odd', 'empty', 'none'])
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
    assert.deepEqual(ids(records, one('customer_external_id', 'NEQ', 'c1'), 'contact'), ['k2', 'k3'])
    assert.deepEqual(ids(records, one('customer_external_id', 'IN', ['C1', 'c2']), 'contact'), ['k2', 'k3'])
    assert.deepEqual(ids(records, one('customer_external_id', 'NIN', ['C1', 'c2']), 'contact'), ['k1'])
    assert.deepEqual(ids(records, [], 'contact'), ['k1', 'k2', 'k3'])
  })
  test('customer-only fields are rejected like the compiler does', () => {
    assert.throws(() => ids(records, one('owner', 'KNOWN'), 'contact'), Refusal)
  })
})

describe('matches: churn default and combination', () => {
  const records = [rec('active', { fitscore: 5 }), rec('churned', { is_churned: true, fitscore: 5 })]
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
    records.filter((r) => matches(r, { where }, catalog, TODAY, 'customer')).map((r) => r.external_id)
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
    fc.constantFrom(null, '', 'a', 'A', '%', 'ab', true, false, 0, 1, 2.5, '2026-11-01', '2026-11-21', '2026-02-30'),
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
        const miss = matches(record, { filters: one(field, neg, value) }, catalog, TODAY, 'customer')
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
  const sorted = (over: Partial<SearchInput> = {}) => compileSearch(input({ sort, cursorKey: key, ...over }))

  test('keys in order, nulls last, strings in byte order, the external ID last; the page joins what keys read', () => {
    const { text } = sorted()
    assert.match(
      text,
      /order by r\.sort_0 desc nulls last, r\.sort_1 asc nulls last, r\.sort_2 asc nulls last, r\.external_id$/,
    )
    const byPlan = compileSearch(input({ sort: sort.slice(1), cursorKey: key })).text
    assert.match(byPlan, /order by sort_0 asc nulls last, sort_1 asc nulls last, r\.external_id\nlimit/)
    assert.ok(!byPlan.includes('union all'))
    assert.match(text, /from \(\(select r\.\*, h\.engagementscore as sort_0, \(\(case .* end\) collate "C"\) as sort_1/)
    assert.match(text, /, r\.created_at as sort_2 from customers r left join customer_scores h /)
    assert.match(text, /json_build_array\(r\.sort_0::text,r\.sort_1,to_char\(r\.sort_2 at time zone 'UTC', /)
    // A score first: the records with a value down the score's index in its direction, a tie in the
    // order of the score row's external ID, then those without a value.
    const rest = /sort_1 asc nulls last, sort_2 asc nulls last/.source
    assert.match(
      text,
      new RegExp(`\\n  and h\\.engagementscore is not null\\norder by sort_0 desc, ${rest}, h\\.external_id\\n`),
    )
    assert.match(
      text,
      /\n  and h\.engagementscore is null\norder by sort_1 asc nulls last, sort_2 asc nulls last, r\.external_id\n/,
    )
  })

  test('a cursor becomes the keyset condition, key by key, a null value included', () => {
    const keys = resolveSort('customer', sort, new Map(catalog.map((d) => [d.codename, d])), [])
    const scope = cursorScope(7, 'customer', keys)
    const cursor = sealCursor(['5', null, '2026-01-01T00:00:00.000001Z', 'c9'], key, scope)
    assert.deepEqual(openCursor(cursor, key, scope, 3), ['5', null, '2026-01-01T00:00:00.000001Z', 'c9'])
    const { text, params } = sorted({ afterCursor: cursor })
    const parts = text.split('\nunion all\n')
    assert.equal(parts.length, 3)
    // The rest of the cursor's tie: its score, after it on the keys that follow.
    assert.match(
      whereOf(parts[0]),
      new RegExp(
        /\n  and h\.engagementscore = \$\d+::text::bigint\n  and \(\(\(case .* end\) collate "C"\) is null and /
          .source +
          /\(r\.created_at is null or r\.created_at > \$\d+::text::timestamptz or /.source +
          /\(r\.created_at = \$\d+::text::timestamptz and h\.external_id > \$\d+::text\)\)\)\n$/.source,
      ),
    )
    assert.match(parts[0], /\norder by sort_1 asc nulls last, sort_2 asc nulls last, h\.external_id\n/)
    // The records beyond its score, then all those without one.
    assert.match(whereOf(parts[1]), /\n  and h\.engagementscore < \$\d+::text::bigint\n$/)
    assert.match(parts[1], /\norder by sort_0 desc, sort_1 asc nulls last, sort_2 asc nulls last, h\.external_id\n/)
    assert.match(whereOf(parts[2]), /\n  and h\.engagementscore is null\n$/)
    assert.ok(params.includes('5') && params.includes('c9'))
  })

  test('one indexed key: the tie and the records beyond are index ranges; after a null, only the nulls', () => {
    for (const [propertyName, value, id, table] of [
      ['engagementscore', 'h.engagementscore', 'h.external_id', 'customer_scores'],
      ['name', '(r.name collate "C")', 'r.external_id', 'customers'],
      ['createdAt', 'r.created_at', 'r.external_id', 'customers'],
    ] as const) {
      for (const direction of ['asc', 'desc'] as const) {
        const keys = resolveSort('customer', [{ propertyName, direction }], new Map(), [])
        const scope = cursorScope(7, 'customer', keys)
        const one = (v: string | null) => {
          const afterCursor = sealCursor([v, 'c9'], key, scope)
          return compileSearch(input({ sort: [{ propertyName, direction }], cursorKey: key, afterCursor })).text
        }
        const [x, byId] = [escape(value), escape(id)]
        const parts = one(propertyName === 'createdAt' ? '2026-01-01T00:00:00Z' : '5').split('\nunion all\n')
        // The rest of the cursor's tie, forwards from the index.
        assert.match(
          parts[0],
          new RegExp(`\\n  and ${x} = [^\\n]*\\n  and ${byId} > \\$\\d+::text\\norder by ${byId}\\n`),
        )
        if (direction === 'desc') {
          // The ascending index walked backwards would give a tie's external IDs descending: the
          // next two values' ties are read forwards, each value found by an index probe.
          assert.equal(parts.length, 5)
          const max = `\\(select max\\(${escape(value.replace(/[hr]\./, 'n.'))}\\) from ${table} n where `
          assert.match(parts[1], new RegExp(`\\n  and ${x} = ${max}[^\\n]* < [^\\n]*\\norder by ${byId}\\n`))
          assert.match(
            parts[2],
            new RegExp(`\\n  and ${x} = ${max}[^\\n]* < \\(select max[^\\n]*\\norder by ${byId}\\n`),
          )
          assert.match(parts[3], new RegExp(`\\n  and ${x} < ${max}[^\\n]*\\norder by sort_0 desc, ${byId}\\n`))
        } else {
          assert.equal(parts.length, 3)
          assert.match(parts[1], new RegExp(`\\n  and ${x} > [^\\n]*\\norder by sort_0 asc, ${byId}\\n`))
        }
        assert.match(parts.at(-1)!, new RegExp(`\\n  and ${x} is null\\norder by r\\.external_id\\n`))
        const afterNull = one(null)
        assert.ok(!afterNull.includes('union all'))
        assert.match(
          afterNull,
          new RegExp(`\\n  and ${x} is null\\n  and r\\.external_id > \\$\\d+::text\\norder by r\\.external_id\\n`),
        )
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
      assert.deepEqual(pathsOf({ sort, cursorKey: key, afterCursor: cursor, ...over }), ['/after'], what)
    }
  })

  test('refusals name their paths', () => {
    const at = (s: unknown) => pathsOf({ sort: s as typeof sort, cursorKey: key })
    assert.deepEqual(at([{ propertyName: 'tags' }, { propertyName: 'nope' }]), [
      '/sort/0/propertyName',
      '/sort/1/propertyName',
    ])
    assert.deepEqual(pathsOf({ entity: 'contact', sort: [{ propertyName: 'upsell_score' }], cursorKey: key }), [
      '/sort/0/propertyName',
    ])
    assert.deepEqual(pathsOf({ sort, cursorKey: key, afterServiceId: 3 }), ['/after'])
  })
})
