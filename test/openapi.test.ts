import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Validator } from '@seriousme/openapi-schema-validator'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { routes } from '../src/api/routes.ts'
import { EVENTS } from '../src/webhooks/events.ts'
import { startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { standalone, validator } from './helpers/openapi.ts'

let s: TestService
let doc: any
before(async () => {
  s = await startTestService({}, { http: true, worker: false })
  const res = await s.call('GET', '/openapi.json')
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type')!, /^application\/json/)
  doc = res.body
})
after(() => s?.stop())

test('the document validates against the OpenAPI 3.1 schema', async () => {
  const validator = new Validator()
  const result = await validator.validate(structuredClone(doc))
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2))
  assert.equal(validator.version, '3.1')
})

test('every route of the routing table is in it, with its method, auth and path parameters', () => {
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(
    ([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
  )
  assert.deepEqual(
    operations.sort(),
    routes.map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`).sort(),
  )
  for (const r of routes) {
    const op = doc.paths[r.path.replace(/:(\w+)/g, '{$1}')][r.method.toLowerCase()]
    assert.equal(op.summary, r.summary)
    const params = [...r.path.matchAll(/:(\w+)/g)].map((m) => m[1])
    assert.deepEqual(
      (op.parameters ?? []).map((p: any) => [p.name, p.in, p.required]),
      [
        ...params.map((p) => [p, 'path', true]),
        ...Object.keys(r.query ?? {}).map((q) => [q, 'query', false]),
      ],
    )
    // A person's session reaches what a search or upload key does, and `manage`; never
    // intake or erasure.
    const security =
      r.auth === 'none'
        ? []
        : r.auth === 'admin'
          ? [{ adminToken: [] }]
          : r.auth === 'session' || r.auth.key === 'manage'
            ? [{ sessionCookie: [] }]
            : r.auth.credential
              ? // A Segment route without a body (the ingest status) takes the service-key
                // header too.
                [{ segmentWriteKey: [] }, ...(r.body ? [] : [{ serviceKey: [r.auth.key] }])]
              : [
                  { serviceKey: [r.auth.key] },
                  ...(['search', 'upload', 'audit'].includes(r.auth.key)
                    ? [{ sessionCookie: [] }]
                    : []),
                ]
    assert.deepEqual(op.security, security, `${r.method} ${r.path}`)
    assert.equal(!!op.requestBody, !!r.body, `${r.method} ${r.path}`)
    assert.match(op.operationId, /^[a-z][A-Za-z]+$/)
    assert.deepEqual(op.tags, [r.tag])
    // What redocly.yaml's operation-2xx-response would check, but for the SSO redirects.
    assert.ok(
      r.reply.status < 300 || r.path.startsWith('/auth/v1/sso/'),
      `${r.method} ${r.path}: no 2xx`,
    )
    for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
      if (status === String(r.reply.status))
        assert.equal(!!response.content, !!(r.reply.body || r.reply.media))
      else assert.match(response.$ref, /^#\/components\/responses\//)
    }
  }
  assert.deepEqual(doc.components.securitySchemes.serviceKey, {
    type: 'apiKey',
    in: 'header',
    name: 'service-key',
    description: doc.components.securitySchemes.serviceKey.description,
  })
  assert.equal(doc.components.securitySchemes.adminToken.scheme, 'bearer')
  assert.deepEqual(
    [
      doc.components.securitySchemes.sessionCookie.in,
      doc.components.securitySchemes.sessionCookie.name,
    ],
    ['cookie', 'service_session'],
  )
})

test('error responses are Problem Details, as the router answers them', () => {
  const responses = (method: string, path: string) =>
    Object.keys(doc.paths[path][method].responses).sort()
  const all = ['200', '400', '401', '403', '406', '408', '413', '429', '490', '503']
  assert.deepEqual(responses('post', '/api/v1/customers'), all)
  assert.deepEqual(
    responses('post', '/api/v1/contacts'),
    all.filter((s) => s !== '490'),
  )
  assert.deepEqual(responses('get', '/api/v1/uploads/{upload_id}'), [
    '200',
    '400',
    '401',
    '403',
    '404',
    '429',
    '503',
  ])
  assert.deepEqual(responses('post', '/admin/v1/accounts'), [
    '201',
    '400',
    '401',
    '408',
    '413',
    '415',
    '503',
  ])
  assert.deepEqual(responses('get', '/healthz'), ['200', '400'])
  assert.deepEqual(responses('get', '/readyz'), ['200', '400', '503'])
  const problem = doc.components.responses.BadRequest.content['application/problem+json'].schema
  assert.deepEqual(problem, { $ref: '#/components/schemas/ProblemDetails' })
  assert.deepEqual(doc.components.schemas.ProblemDetails.required, [
    'type',
    'title',
    'status',
    'detail',
  ])
  assert.ok(doc.components.responses.TooManyRequests.headers['Retry-After'])
  for (const response of Object.values(doc.components.responses as Record<string, any>)) {
    const { example } = response.content['application/problem+json']
    assert.ok(
      validator({ formats: true }).validate(
        standalone(doc, doc.components.schemas.ProblemDetails),
        example,
      ),
    )
  }
})

test('redocly lint finds no error and no warning under the committed redocly.yaml', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'openapi-lint-'))
  try {
    const file = join(dir, 'openapi.json')
    writeFileSync(file, JSON.stringify(doc))
    const lint = spawnSync(
      'node_modules/.bin/redocly',
      ['lint', file, '--config', 'redocly.yaml', '--format', 'json'],
      {
        encoding: 'utf8',
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      },
    )
    const report = JSON.parse(lint.stdout)
    assert.deepEqual(
      report.totals,
      { errors: 0, warnings: 0, ignored: 0 },
      JSON.stringify(report.problems, null, 2),
    )
    assert.equal(lint.status, 0, lint.stderr)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('servers, tags, licence and named schemas are there for generated clients', () => {
  assert.deepEqual(doc.servers, [
    { url: '/', description: 'The service that serves this document' },
  ])
  assert.deepEqual(
    doc.tags.map((t: any) => t.name),
    [
      'search',
      'segments',
      'insights',
      'uploads',
      'records',
      'tracking',
      'admin',
      'operations',
      'privacy',
      'people',
      'audit',
      'events',
    ],
  )
  // Every event a webhook can choose is published under `webhooks`, its payload with an example.
  assert.deepEqual(Object.keys(doc.webhooks), EVENTS)
  const changed =
    doc.webhooks['customer.score_changed'].post.requestBody.content['application/json']
  assert.equal(changed.example.event, 'customer.score_changed')
  assert.ok(changed.schema.properties.data.properties.changes)
  assert.equal(doc.info.license.identifier, 'MIT')
  for (const name of [
    'Customer',
    'Contact',
    'CustomerPage',
    'Upload',
    'NewWebhook',
    'ProblemDetails',
  ]) {
    assert.ok(doc.components.schemas[name], name)
  }
  const search = doc.paths['/api/v1/customers/search'].post
  assert.equal(search.operationId, 'searchCustomers')
  assert.deepEqual(search.responses['200'].content['application/json'].schema, {
    $ref: '#/components/schemas/CustomerPage',
  })
  assert.ok(search.requestBody.content['application/json'].example.filters)
  assert.equal(doc.paths['/v1/customer/{external_id}'].get.operationId, 'getCustomerAlias')
  assert.equal(doc.paths['/admin/v1/accounts/{id}/webhooks'].post.operationId, 'addWebhook')
})

test('the request schemas are valid JSON Schema 2020-12 and judge bodies as the API does', async () => {
  // Formats (email) are annotations in 2020-12; the server checks them.
  const ajv = validator({ formats: false })
  const compile = (schema: object) => ajv.compile(standalone(doc, schema))
  compile(doc.components.schemas.ProblemDetails)
  const bodies = Object.values(doc.paths as Record<string, Record<string, any>>)
    .flatMap((item) => Object.values(item))
    .filter((op) => op.requestBody)
  assert.ok(bodies.length >= 10)
  for (const op of bodies) compile(op.requestBody.content['application/json'].schema)

  const customers = compile(
    doc.paths['/api/v1/customers'].post.requestBody.content['application/json'].schema,
  )
  const good = {
    customers: [
      {
        external_id: 'c1',
        name: 'One',
        owner_email: null,
        attributes: { plan: 'pro', seats: 3, sso: true },
        metrics: [{ date: '2026-01-01', logins: 4 }],
      },
    ],
  }
  assert.equal(customers(good), true, JSON.stringify(customers.errors))
  const { api } = await s.account()
  for (const bad of [
    {},
    { customers: [] },
    { customers: [{ name: 'x' }] },
    { customers: [{ external_id: '', name: 'x' }] },
    { customers: [{ external_id: 'x', name: 'x', attributes: { a: [1] } }] },
    { customers: [{ external_id: 'x', name: 'x', metrics: [{ logins: 1 }] }] },
  ]) {
    assert.equal(customers(bad), false, JSON.stringify(bad))
    assert.equal((await api('/api/v1/customers', bad)).status, 400, JSON.stringify(bad))
  }
  const property = compile(
    doc.paths['/admin/v1/accounts/{id}/properties'].post.requestBody.content['application/json']
      .schema,
  )
  assert.equal(
    property({ entity: 'customer', kind: 'metric', codename: 'logins', type: 'number' }),
    true,
  )
  assert.equal(
    property({ entity: 'customer', kind: 'metric', codename: '9lives', type: 'number' }),
    false,
  )
  assert.equal(
    property({ entity: 'account', kind: 'metric', codename: 'logins', type: 'number' }),
    false,
  )

  // Rules between values are stated too (not, x-unique-key), and the service names the field.
  const scored = await scoredAccount(s, 'Rules')
  const both = {
    entity: 'customer',
    kind: 'attribute',
    codename: 'tier',
    type: 'string',
    label: 'Tier',
    name: 'Tier',
  }
  assert.equal(property(both), false)
  const refused = await s.admin('POST', `/accounts/${scored.id}/properties`, both)
  assert.deepEqual(
    [refused.status, refused.body.errors?.[0]?.path],
    [400, '/name'],
    JSON.stringify(refused.body),
  )
  const twice = {
    customers: [
      { ...good.customers[0], metrics: [{ date: '2026-01-01' }, { date: '2026-01-01' }] },
    ],
  }
  assert.equal(customers(twice), false)
  const repeated = await scored.api('/api/v1/customers', twice)
  const paths = repeated.body.errors?.map((e: { path: string }) => e.path)
  assert.deepEqual(
    [repeated.status, paths],
    [400, ['/customers/0/metrics/1/date']],
    JSON.stringify(repeated.body),
  )
})

// The rules the service enforces beyond a body's shape are in the document too: a filter's operands
// by operator, `after` by whether the search is sorted, a rule's scores away from zero.
test('filters, after and scores: the schema refuses what the service refuses and accepts what it accepts', async () => {
  const ajv = validator({ formats: false })
  const body = (path: string, method: string) =>
    ajv.compile(
      standalone(doc, doc.paths[path][method].requestBody.content['application/json'].schema),
    )
  const search = body('/api/v1/customers/search', 'post')
  const scoring = body('/admin/v1/accounts/{id}/scoring', 'put')
  const a = await scoredAccount(s, 'Contract')
  for (const external_id of ['k1', 'k2'])
    await a.api('/api/v1/customer', { external_id, name: external_id })
  const next = async (sort?: unknown) =>
    (await a.api('/api/v1/customers/search', { limit: 1, sort })).body.paging.next.after
  const [id, cursor] = [await next(), await next([{ propertyName: 'name' }])]
  assert.deepEqual([typeof id, typeof cursor], ['number', 'string'])
  const filter = (f: object) => ({ filters: [{ propertyName: 'country', ...f }] })
  const sorted = { sort: [{ propertyName: 'name' }] }
  const cases: [object, boolean][] = [
    [filter({ operator: 'IN', values: ['US'] }), true],
    [filter({ operator: 'NIN', value: 'US' }), true],
    [filter({ operator: 'IN' }), false],
    [filter({ operator: 'IN', values: [] }), false],
    [filter({ operator: 'IN', value: 'US', values: [] }), false],
    [filter({ operator: 'EQ', value: 'US' }), true],
    [filter({ operator: 'EQ', values: ['US'] }), false],
    [filter({ operator: 'GTD' }), false],
    [filter({ operator: 'KNOWN' }), true],
    [filter({ operator: 'UNKNOWN', value: 'not read' }), true],
    [filter({ operator: 'LIKE', value: 'u'.repeat(256) }), true],
    [filter({ operator: 'NLIKE', value: 'u'.repeat(257) }), false],
    [{ where: { not: { propertyName: 'country', operator: 'EQ' } } }, false],
    [{ after: id }, true],
    [{ after: id, sort: [] }, true],
    [{ after: cursor }, false],
    [{ after: cursor, ...sorted }, true],
    [{ after: id, ...sorted }, false],
  ]
  for (const [request, valid] of cases) {
    const label = JSON.stringify(request).slice(0, 120)
    assert.equal(search(request), valid, `${label}: ${JSON.stringify(search.errors)}`)
    assert.equal(
      (await a.api('/api/v1/customers/search', request)).status,
      valid ? 200 : 400,
      label,
    )
  }
  for (const [score, valid] of [
    [0, true],
    [-0, true],
    [1e-6, true],
    [-1e-6, true],
    [5e-7, false],
    [-1e-9, false],
    [Number.MIN_VALUE, false],
  ] as const) {
    const model = {
      customer: { fit: [{ codename: 'country', weight: 1, values: { US: score }, default: 1 }] },
    }
    assert.equal(scoring(model), valid, `${score}: ${JSON.stringify(scoring.errors)}`)
    assert.equal(
      (await s.admin('PUT', `/accounts/${a.id}/scoring`, model)).status,
      valid ? 200 : 400,
      String(score),
    )
  }
})

test("an unknown key in a scoring rule is named, with the key it likely meant and the rule's forms", async () => {
  const a = await scoredAccount(s, 'Typo')
  const rule = { codename: 'logins', weight: 1, bad: 0, good: 40, defualt: 1 }
  const res = await s.admin('PUT', `/accounts/${a.id}/scoring`, {
    customer: { engagement: [rule] },
  })
  assert.equal(res.status, 400)
  assert.deepEqual(res.body.errors, [
    {
      path: '/customer/engagement/0/defualt',
      message:
        'Unknown key customer.engagement[0].defualt (did you mean default?): a rule is an object with `codename` ' +
        'and `weight` plus either numeric `bad` and `good`, a boolean `good`, or a `values` map with an optional ' +
        '`default`.',
    },
  ])
})
