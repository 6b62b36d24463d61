// Requests generated from the published /openapi.json and sent to the running service. For every
// operation, fast-check draws path, query and body values from the document's own schemas (a few
// values that name state, such as a filter's field or an account's user, are drawn from what the
// fixture created), then breaks some of them: a wrong type, an unknown key, a number out of range,
// a value outside an enum, a repeated query parameter, a path id that is no number. Three things
// must hold: a valid request is accepted (2xx, or a refusal the document lists that depends on
// state: 404 for a record that is not there, 409); an invalid one gets a 4xx; and every answer has
// a status the operation lists and a body its schema accepts. The seed is fixed: a run repeats.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import type { ValidateFunction } from 'ajv'
import { ADMIN_TOKEN, startTestService, type TestService } from './helpers/service.ts'
import { scoredAccount } from './helpers/fixtures.ts'
import { standalone, validator } from './helpers/openapi.ts'
import { SCOPES } from '../src/db/key-check.ts'

const SEED = 31_009
const VALID_RUNS = 12
const INVALID_RUNS = 6

let s: TestService
let doc: any
let main: Awaited<ReturnType<typeof scoredAccount>>
let scratch: Awaited<ReturnType<typeof scoredAccount>>
// Ids of records the fixture made, by path parameter name.
const known: Record<string, string> = {
  external_id: 'known',
  contact_id: 'pat',
  entity: 'customer',
}
before(async () => {
  s = await startTestService(
    { apiRateLimit: 1_000_000, trackRateLimit: 1_000_000, maxPendingUploads: 1_000_000 },
    { http: true, worker: false },
  )
  main = await scoredAccount(s)
  // A key of every scope, erase and audit included (the default scopes leave them out).
  const every = await s.admin('POST', `/accounts/${main.id}/keys`, { scopes: SCOPES })
  main = { ...main, token: every.body.token }
  await s.admin('PUT', `/accounts/${main.id}/tracking`, { domains: ['acme.test'] })
  await s.admin('POST', `/accounts/${main.id}/tags`, { title: 'VIP' })
  // Admin operations that change an account act on one of their own, so the main one stays usable.
  scratch = await scoredAccount(s, 'Scratch')
  for (const a of [main, scratch]) {
    await a.api('/api/v1/customer', {
      external_id: 'known',
      name: 'Known',
      attributes: { country: 'US' },
    })
    await a.api('/api/v1/customer/known/contact', {
      contact_external_id: 'pat',
      contact_name: 'Pat',
    })
  }
  await s.admin('POST', `/accounts/${scratch.id}/tags`, { title: 'VIP' })
  const segment = await main.api('/api/v1/segments', {
    name: 'US',
    filters: [FIELDS.customer.filters[1]],
  })
  known.segment_id = String(segment.body.id)
  const hook = await s.admin('POST', `/accounts/${scratch.id}/webhooks`, {
    url: 'https://hooks.example.invalid/in',
    events: ['customer.created'],
  })
  known.webhook_id = String(hook.body.id)
  pinned.trackerKey = () => fc.constant(main.trackerKey)
  session = await signedInAdmin()
  // Sign-out gets a session of its own, so that ending it leaves the others' session signed in.
  spent = await signedInAdmin(9000000000001)
  doc = (await s.call('GET', '/openapi.json')).body
})
after(() => s?.stop())

// An admin of the main account, signed in, for the operations only a session reaches. Its id is far
// beyond those the generator draws, so that a drawn removal does not end the session midway.
let session: Record<string, string> = {}
let spent: Record<string, string> = {}
const signedInAdmin = async (userId = 9000000000000) => {
  const email = `fuzz-admin-${userId}@acme.test`
  const [{ id }] =
    await s.sql`insert into users (account_id, id, email, role) overriding system value
    values (${main.id}, ${userId}, ${email}, 'admin') returning id`
  const link = await s.admin('POST', `/accounts/${main.id}/users/${id}/reset`)
  const password = 'fuzz admin password'
  await s.call('POST', '/auth/v1/password', { token: link.body.reset_token, password })
  const res = await s.call('POST', '/auth/v1/sign-in', { email, password })
  const cookie = /service_session=[^;]*/.exec(res.headers.get('set-cookie')!)![0]
  return { cookie, 'x-csrf-token': res.body.csrf_token, origin: s.base }
}

// Values that name state the fixture made: drawn from it, not from the schema alone, for the
// entity the operation is about.
const FIELDS = {
  customer: {
    filters: [
      { propertyName: 'logins', operator: 'GT', value: '3' },
      { propertyName: 'country', operator: 'EQ', value: 'US' },
      { propertyName: 'country', operator: 'IN', values: ['US', 'DE'] },
      { propertyName: 'name', operator: 'LIKE', value: 'K%' },
      { propertyName: 'is_churned', operator: 'EQ', value: 'false' },
      { propertyName: 'plan_started', operator: 'LTD', value: '30' },
      { propertyName: 'engagementscore', operator: 'UNKNOWN' },
    ],
    sort: ['logins', 'name', 'createdAt', 'engagementscore'],
    properties: ['country', 'logins', 'has_sso'],
  },
  contact: {
    filters: [
      { propertyName: 'role', operator: 'EQ', value: 'admin' },
      { propertyName: 'sessions', operator: 'GTE', value: '1' },
      { propertyName: 'customer_external_id', operator: 'EQ', value: 'known' },
      { propertyName: 'name', operator: 'LIKE', value: 'P%' },
    ],
    sort: ['sessions', 'name', 'updatedAt'],
    properties: ['role', 'sessions'],
  },
}
let fields = FIELDS.customer
const NUMBER_FIELDS = ['logins', 'seats', 'engagementscore', 'fitscore', 'churn_risk']
// By key: fields the account has, its users and tags; a webhook URL whose host resolves nowhere
// (the reserved .invalid), and times in the years a client sends.
const pinned: Record<string, () => fc.Arbitrary<unknown>> = {
  propertyName: () => fc.constantFrom(...fields.sort),
  properties: () => fc.subarray(fields.properties),
  fields: () => fc.subarray(NUMBER_FIELDS, { minLength: 1 }),
  owner_email: () => fc.constantFrom('owner@acme.test', null),
  email: () => fc.stringMatching(/^[a-z]{1,8}$/).map((w) => `${w}@acme.test`),
  titles: () => fc.subarray(['VIP']),
  url: () => fc.constant('https://hooks.example.invalid/in'),
  since: () =>
    fc
      .date({ min: new Date('2000-01-01'), max: new Date('2099-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString()),
}
// Optional keys left out of valid requests: their valid values are state (a cursor of
// an earlier page).
const OMITTED = new Set(['after'])

type Schema = Record<string, any>
const resolve = (schema: Schema): Schema =>
  schema.$ref
    ? resolve({ ...doc.components.schemas[schema.$ref.split('/').pop()], ...omit(schema, '$ref') })
    : schema
const omit = (o: Schema, ...keys: string[]) =>
  Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)))

const text = (schema: Schema) => {
  if (schema.format === 'date')
    return fc
      .date({ min: new Date('1990-01-01'), max: new Date('2090-12-31'), noInvalidDate: true })
      .map((d) => d.toISOString().slice(0, 10))
  if (schema.format === 'date-time')
    return fc.date({ noInvalidDate: true }).map((d) => d.toISOString())
  if (schema.format === 'email') return pinned.email()
  // fast-check draws from a pattern without lookaheads; a pattern's lookahead only narrows it.
  if (schema.pattern) {
    const pattern = new RegExp(schema.pattern)
    return fc
      .stringMatching(new RegExp(schema.pattern.replace(/\(\?[=!][^)]*\)/g, '')))
      .filter((x) => pattern.test(x))
  }
  return fc.string({
    minLength: Math.max(schema.minLength ?? 0, 1),
    maxLength: Math.min(schema.maxLength ?? 20, 20),
    unit: 'grapheme-ascii',
  })
}

const number = (schema: Schema, integer: boolean) => {
  const min = schema.minimum ?? -1_000_000
  const max = schema.maximum ?? 1_000_000
  const whole = fc.integer({
    min: Math.ceil(Math.max(min, -(2 ** 52))),
    max: Math.floor(Math.min(max, 2 ** 52)),
  })
  return integer
    ? whole
    : fc.oneof(
        whole,
        whole.map((n) => Math.min(max, Math.max(min, n / 100))),
      )
}

// A value the schema accepts, as a client generated from the document would send it.
const valid = (raw: Schema, depth = 0, key = ''): fc.Arbitrary<unknown> => {
  if (pinned[key]) return pinned[key]()
  const schema = resolve(raw)
  if ('const' in schema) return fc.constant(schema.const)
  if (schema.enum) return fc.constantFrom(...schema.enum)
  if (schema.properties?.propertyName && schema.properties?.operator)
    return fc.constantFrom(...fields.filters)
  const options = schema.oneOf ?? schema.anyOf
  if (options) {
    const usable =
      depth > 2 ? options.filter((o: Schema) => !JSON.stringify(o).includes('Where')) : options
    return fc.oneof(...usable.map((o: Schema) => valid(o, depth + 1, key)))
  }
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  switch (type) {
    case 'string':
      return text(schema)
    case 'integer':
      return number(schema, true)
    case 'number':
      return number(schema, false)
    case 'boolean':
      return fc.boolean()
    case 'null':
      return fc.constant(null)
    case 'array': {
      // Unique items, by the key x-unique-key names when there is one.
      const key: string | undefined = schema['x-unique-key']
      const bounds = {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 3, 3),
      }
      const items = valid(schema.items ?? {}, depth + 1)
      return key || schema.uniqueItems
        ? fc.uniqueArray(items, {
            ...bounds,
            selector: (x: any) => (key ? x?.[key] : JSON.stringify(x)),
          })
        : fc.array(items, bounds)
    }
    case 'object': {
      const properties: Record<string, Schema> = schema.properties ?? {}
      const required: string[] = schema.required ?? []
      if (!schema.properties && schema.additionalProperties)
        return fc.dictionary(
          fc.stringMatching(/^[a-z]{1,8}$/),
          valid(schema.additionalProperties, depth + 1),
          {
            maxKeys: 3,
          },
        )
      const keys = Object.keys(properties).filter((k) => required.includes(k) || !OMITTED.has(k))
      return fc
        .record(Object.fromEntries(keys.map((k) => [k, valid(properties[k], depth + 1, k)])), {
          requiredKeys: required,
        })
        .map((o) =>
          dependable(
            schema,
            Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)),
          ),
        )
    }
    default:
      return fc.constantFrom('x', 1, true, null)
  }
}

// Keys drawn one by one may break the rules between them: of keys the schema's `not` forbids
// together, the last goes; a key whose dependentSchemas the others do not meet goes.
const dependable = (schema: Schema, o: Record<string, unknown>) => {
  const together: string[] = schema.not?.required ?? []
  if (together.length && together.every((k) => k in o)) delete o[together[together.length - 1]]
  for (const [k, dependency] of Object.entries(
    (schema.dependentSchemas ?? {}) as Record<string, Schema>,
  ))
    if (k in o && !loose.validate({ type: 'object', ...dependency }, o)) delete o[k]
  return o
}
const loose = validator({ formats: false })

// One way to break a valid value: a wrong type, an unknown key, a number past its bound, a word
// outside its enum. Which ones apply depends on the schema; the result is checked to be invalid.
const broken = (raw: Schema, value: unknown): unknown[] => {
  const schema = resolve(raw)
  const out: unknown[] = []
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  if (type === 'object' && value && typeof value === 'object' && !Array.isArray(value)) {
    if (schema.additionalProperties === false) out.push({ ...value, zz_unknown_key: 1 })
    out.push([value])
    for (const [k, sub] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) {
      if (k in (value as object))
        for (const b of broken(sub, (value as any)[k]).slice(0, 2)) out.push({ ...value, [k]: b })
    }
  } else if (type === 'integer' || type === 'number') {
    out.push('1')
    if (schema.maximum !== undefined) out.push(schema.maximum + 1)
    if (schema.minimum !== undefined) out.push(schema.minimum - 1)
    if (type === 'integer') out.push(1.5)
  } else if (type === 'string') {
    out.push(12345)
    if (schema.enum) out.push('not-one-of-them')
  } else if (type === 'array') {
    out.push({ not: 'an array' })
  } else if (type === 'boolean') out.push('true')
  return out
}

const operations = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  )

// The path's records: the fixture's for reads and writes, anything the schema allows for deletes
// and other operations that would take the fixture away (they then answer 404).
const DESTRUCTIVE = /^(delete|revoke|remove|disable|rotate|cancel|retry|redeliver)/
const pathValue = (name: string, schema: Schema, destructive: boolean): fc.Arbitrary<string> => {
  const drawn = valid(schema).map((x) => String(x))
  if (name === 'id') return fc.constant(String(scratch.id))
  return destructive || !known[name] ? drawn : fc.oneof(fc.constant(known[name]), drawn)
}

// Operations whose valid requests still depend on state beyond their path: a scoring model's rules
// must name properties of the types their forms score. The answer must be a documented refusal,
// but need not be a success.
// Sign-in, a password's link and the session's own routes depend on who signed in (the generator's
// emails and tokens name no one; its sign-out ends the session), and an SSO callback on the state
// its start left in the browser. A churn model's training needs features that name the account's
// properties, and labels of both classes. An SSO issuer must be an https (or loopback) address,
// which the schema's string cannot say.
const STATEFUL = new Set([
  'setSso',
  'setAccountSso',
  'setScoring',
  'previewScoring',
  'signIn',
  'setPassword',
  'signOut',
  'me',
  'ssoStart',
  'ssoCallback',
  'trainChurnModel',
  'trainAccountChurnModel',
])

const TITLE =
  'requests generated from /openapi.json: valid ones accepted, broken ones refused, answers as documented'
test(TITLE, async () => {
  const ajv = validator({ formats: true })
  const compiled = new Map<object, ValidateFunction>()
  const check = (schema: object, value: unknown) => {
    if (!compiled.has(schema)) compiled.set(schema, ajv.compile(standalone(doc, schema)))
    const fn = compiled.get(schema)!
    return fn(value) ? null : fn.errors
  }
  const failures: string[] = []
  let sent = 0
  const send = async (
    method: string,
    path: string,
    op: any,
    query: string,
    body: unknown,
    expect: 'valid' | 'invalid',
  ) => {
    const security = op.security[0] ? Object.keys(op.security[0])[0] : undefined
    const headers: Record<string, string> =
      security === 'adminToken'
        ? { authorization: `Bearer ${ADMIN_TOKEN}` }
        : security === 'serviceKey'
          ? { 'service-key': main.token }
          : security === 'segmentWriteKey'
            ? { authorization: `Basic ${Buffer.from(`${main.token}:`).toString('base64')}` }
            : security === 'sessionCookie'
              ? op.operationId === 'signOut'
                ? spent
                : session
              : {}
    // A writeKey beside the Basic login must name the same key (a string one is the generator's).
    const named = security === 'segmentWriteKey' && typeof (body as any)?.writeKey === 'string'
    const res = await s.call(
      method,
      path + query,
      named ? { ...(body as object), writeKey: main.token } : body,
      headers,
    )
    sent++
    const label = `${op.operationId} ${method} ${path}${query} ${JSON.stringify(body)?.slice(0, 300)} -> ${res.status}`
    const response = op.responses[String(res.status)]
    if (!response)
      return failures.push(
        `${label}: status not documented: ${JSON.stringify(res.body)?.slice(0, 300)}`,
      )
    if (res.status >= 500) return failures.push(`${label}: a 5xx`)
    const media = response.$ref
      ? doc.components.responses[response.$ref.split('/').pop()].content['application/problem+json']
      : response.content?.['application/json']
    const errors = media && check(media.schema, res.body)
    if (errors)
      failures.push(
        `${label}: answer does not match its schema: ${JSON.stringify(errors).slice(0, 300)}`,
      )
    if (expect === 'invalid' && (res.status < 400 || res.status >= 500))
      failures.push(`${label}: broken, yet accepted`)
    if (
      expect === 'valid' &&
      res.status >= 300 &&
      ![404, 409].includes(res.status) &&
      !STATEFUL.has(op.operationId)
    )
      failures.push(`${label}: valid, yet refused: ${JSON.stringify(res.body)?.slice(0, 300)}`)
  }

  for (const [i, { method, path, op }] of operations().entries()) {
    const destructive = DESTRUCTIVE.test(op.operationId)
    fields = /Contact/.test(op.operationId) ? FIELDS.contact : FIELDS.customer
    const params: any[] = op.parameters ?? []
    const inPath = params.filter((p) => p.in === 'path')
    const inQuery = params.filter((p) => p.in === 'query')
    const bodySchema = op.requestBody?.content['application/json'].schema
    const request = fc.record({
      path: fc
        .tuple(...inPath.map((p) => pathValue(p.name, p.schema, destructive)))
        .map((values) =>
          inPath.reduce(
            (at, p, j) => at.replace(`{${p.name}}`, encodeURIComponent(values[j])),
            path,
          ),
        ),
      query: fc.record(Object.fromEntries(inQuery.map((p) => [p.name, valid(p.schema)])), {
        requiredKeys: [],
      }),
      body: bodySchema ? valid(bodySchema) : fc.constant(undefined),
    })
    const samples = fc.sample(request, { numRuns: VALID_RUNS, seed: SEED + i })
    const queryString = (q: Record<string, unknown>, extra = '') => {
      const text =
        new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)])).toString() + extra
      return text ? `?${text}` : ''
    }
    for (const r of samples) {
      // The draw missed a rule the generator does not model.
      if (bodySchema && check(bodySchema, r.body)) continue
      await send(method, r.path, op, queryString(r.query), r.body, 'valid')
    }
    // Broken: the body (where there is one), then each query parameter.
    for (const r of samples.slice(0, INVALID_RUNS)) {
      if (bodySchema) {
        for (const bad of broken(bodySchema, r.body)
          .filter((b) => check(bodySchema, b))
          .slice(0, 3))
          await send(method, r.path, op, '', bad, 'invalid')
      }
    }
    const first = samples[0]
    // A path id that is not a whole number names nothing.
    for (const p of inPath.filter((q) => q.schema.type === 'integer')) {
      const elsewhere = inPath.filter((q) => q !== p)
      const at = elsewhere.reduce((x, q) => x.replace(`{${q.name}}`, known[q.name] ?? '1'), path)
      await send(method, at.replace(`{${p.name}}`, 'x1'), op, '', first.body, 'invalid')
    }
    for (const p of inQuery) {
      const schema = resolve(p.schema)
      const wrong = [
        ...(schema.enum || schema.type === 'integer' ? ['x'] : []),
        ...(schema.maximum !== undefined ? [String(schema.maximum + 1)] : []),
        ...(schema.minLength ? [''] : []),
      ]
      for (const w of wrong)
        await send(method, first.path, op, queryString({ [p.name]: w }), first.body, 'invalid')
      const again = fc.sample(valid(p.schema), { numRuns: 1, seed: SEED })[0]
      const twice = encodeURIComponent(String(again))
      await send(
        method,
        first.path,
        op,
        `?${p.name}=${twice}&${p.name}=${twice}`,
        first.body,
        'invalid',
      )
    }
  }
  assert.ok(sent > 500, `only ${sent} requests`)
  assert.deepEqual(failures, [])
})
