import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Validator } from '@seriousme/openapi-schema-validator'
// The validator's own JSON Schema engine (a dependency of it): the OpenAPI 3.1 schema only checks
// that each Schema Object is an object, so the schemas inside are compiled against draft 2020-12.
import { Ajv2020 } from 'ajv/dist/2020.js'
import { routes } from '../src/api/routes.ts'
import { startTestService, type TestService } from './helpers/service.ts'

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
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
  )
  assert.deepEqual(operations.sort(), routes.map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`).sort())
  for (const r of routes) {
    const op = doc.paths[r.path.replace(/:(\w+)/g, '{$1}')][r.method.toLowerCase()]
    assert.equal(op.summary, r.summary)
    const params = [...r.path.matchAll(/:(\w+)/g)].map((m) => m[1])
    assert.deepEqual(
      (op.parameters ?? []).map((p: any) => [p.name, p.in, p.required]),
      params.map((p) => [p, 'path', true]),
    )
    const security = r.auth === 'none' ? [] : r.auth === 'admin' ? [{ adminToken: [] }] : [{ serviceKey: [] }]
    assert.deepEqual(op.security, security, `${r.method} ${r.path}`)
    assert.equal(!!op.requestBody, !!r.body, `${r.method} ${r.path}`)
    for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
      if (status !== '2XX') assert.match(response.$ref, /^#\/components\/responses\//)
    }
  }
  assert.deepEqual(doc.components.securitySchemes.serviceKey, {
    type: 'apiKey',
    in: 'header',
    name: 'service-key',
    description: doc.components.securitySchemes.serviceKey.description,
  })
  assert.equal(doc.components.securitySchemes.adminToken.scheme, 'bearer')
})

test('error responses are Problem Details, as the router answers them', () => {
  const responses = (method: string, path: string) => Object.keys(doc.paths[path][method].responses).sort()
  assert.deepEqual(responses('post', '/api/v1/customers'), ['2XX', '400', '401', '403', '406', '413', '429', '490'])
  assert.deepEqual(responses('post', '/api/v1/contacts'), ['2XX', '400', '401', '403', '406', '413', '429'])
  assert.deepEqual(responses('get', '/api/v1/uploads/{upload_id}'), ['2XX', '401', '403', '404', '429'])
  assert.deepEqual(responses('post', '/admin/v1/accounts'), ['2XX', '400', '401', '413'])
  assert.deepEqual(responses('get', '/healthz'), ['2XX'])
  const problem = doc.components.responses.BadRequest.content['application/problem+json'].schema
  assert.deepEqual(problem, { $ref: '#/components/schemas/ProblemDetails' })
  assert.deepEqual(doc.components.schemas.ProblemDetails.required, ['type', 'title', 'status', 'detail'])
  assert.ok(doc.components.responses.TooManyRequests.headers['Retry-After'])
})

test('the request schemas are valid JSON Schema 2020-12 and judge bodies as the API does', async () => {
  // Formats (email) are annotations in 2020-12; the server checks them.
  const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: false })
  ajv.compile(doc.components.schemas.ProblemDetails)
  const bodies = Object.values(doc.paths as Record<string, Record<string, any>>)
    .flatMap((item) => Object.values(item))
    .filter((op) => op.requestBody)
  assert.ok(bodies.length >= 10)
  for (const op of bodies) ajv.compile(op.requestBody.content['application/json'].schema)

  const customers = ajv.compile(doc.paths['/api/v1/customers'].post.requestBody.content['application/json'].schema)
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
  const property = ajv.compile(
    doc.paths['/admin/v1/accounts/{id}/properties'].post.requestBody.content['application/json'].schema,
  )
  assert.equal(property({ entity: 'customer', kind: 'metric', codename: 'logins', type: 'number' }), true)
  assert.equal(property({ entity: 'customer', kind: 'metric', codename: '9lives', type: 'number' }), false)
  assert.equal(property({ entity: 'account', kind: 'metric', codename: 'logins', type: 'number' }), false)
})
