// The one date rule (src/dates.ts) at every entry point: 0000-01-01 and 2024-02-30 are refused with
// a 400 naming the field wherever a date enters, and the edges of the range are accepted and
// processed. The SQL twins agree with the JavaScript rule.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { isDate, sqlDateOrNull, timeOf, today } from '../src/dates.ts'
import { emptyStats, importFile } from '../src/import/import.ts'
import { scoredAccount, uploadAndWait } from './helpers/fixtures.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const BAD = [
  '0000-01-01',
  '2024-02-30',
  '2023-02-29',
  '2024-13-01',
  '2024-00-10',
  '2024-1-01',
  '10000-01-01',
  ' 2024-01-01',
  '',
]
const GOOD = ['0001-01-01', '9999-12-31', '2024-02-29', '2000-02-29', '1970-01-01', '0099-12-31']

test('isDate: a real calendar day, years 0001-9999', () => {
  for (const d of GOOD) assert.equal(isDate(d), true, d)
  for (const d of BAD) assert.equal(isDate(d), false, JSON.stringify(d))
  assert.equal(isDate(20240101), false)
  assert.match(today(), /^\d{4}-\d{2}-\d{2}$/)
  assert.equal(today(Date.UTC(2026, 10, 25, 23, 59)), '2026-11-25')
})

test('timeOf: an ISO 8601 date-time with a zone, of a real calendar day; else NaN', () => {
  const cases: [string, number][] = [
    ['2026-11-27T10:00:00Z', Date.UTC(2026, 10, 27, 10)],
    ['2026-11-27T10:00:00.1Z', Date.UTC(2026, 10, 27, 10, 0, 0, 100)],
    ['2026-11-27T10:00:00.987654321Z', Date.UTC(2026, 10, 27, 10, 0, 0, 987)],
    ['2026-11-27T00:30+01:00', Date.UTC(2026, 10, 26, 23, 30)],
    ['2024-02-29T23:59:59-00:30', Date.UTC(2024, 2, 1, 0, 29, 59)],
  ]
  for (const [text, at] of cases) assert.equal(timeOf(text), at, text)
  // Years 0-99 are not mapped to 1900-1999, as Date.UTC maps them.
  assert.equal(new Date(timeOf('0099-01-01T00:00:00Z')).getUTCFullYear(), 99)
  for (const text of [
    '11/27/2026',
    'Nov 27 2026',
    '2026-11-27T10:00:00',
    '2026-11-27',
    '2026-02-30T10:00:00Z',
    '2023-02-29T10:00:00Z',
    '2026-11-27T24:00:00Z',
    '2026-11-27T10:60:00Z',
    '2026-11-27T10:00:60Z',
    '2026-11-27 10:00:00Z',
    '2026-11-27T10:00:00+0200',
    '2026-11-27T10:00:00+24:00',
    '2026-11-27T10:00:00.Z',
    '0000-01-01T00:00:00Z',
    '',
  ])
    assert.ok(Number.isNaN(timeOf(text)), JSON.stringify(text))
  assert.ok(Number.isNaN(timeOf(1764237600000)))
})

describe('entry points', () => {
  let s: TestService
  let a: Awaited<ReturnType<typeof scoredAccount>>
  before(async () => {
    s = await startTestService()
    a = await scoredAccount(s)
  })
  after(() => s.stop())

  test('the SQL twins (is_iso_date, sqlDateOrNull) agree with isDate', async () => {
    for (const d of [...GOOD, ...BAD, '2024-02-31', '0000-02-29', '9999-12-32']) {
      const [row] = await s.sql.unsafe(
        `select is_iso_date($1::text) as iso, ${sqlDateOrNull('$1::text')} is not null as cast`,
        [d],
      )
      assert.deepEqual([row.iso, row.cast], [isDate(d), isDate(d)], d)
    }
  })

  for (const date of ['0000-01-01', '2024-02-30']) {
    test(`${date} is a 400 on customer and contact uploads, never an upload that fails`, async () => {
      const uploads = async () =>
        (await s.sql`select count(*)::int as n from uploads where account_id = ${a.id}`)[0].n
      const before = await uploads()
      const metric = await a.api('/api/v1/customers', {
        customers: [{ external_id: 'x', name: 'X', metrics: [{ date, logins: 1 }] }],
      })
      assert.equal(metric.status, 400)
      assert.deepEqual(
        metric.body.errors.map((e: { path: string }) => e.path),
        ['/customers/0/metrics/0/date'],
      )
      const attribute = await a.api('/api/v1/customers', {
        customers: [{ external_id: 'x', name: 'X', attributes: { plan_started: date } }],
      })
      assert.equal(attribute.status, 400)
      assert.deepEqual(
        attribute.body.errors.map((e: { path: string }) => e.path),
        ['/customers/0/attributes/plan_started'],
      )
      const contact = await a.api('/api/v1/contacts', {
        contacts: [
          {
            customer_external_id: 'x',
            contact_external_id: 'y',
            contact_name: 'Y',
            metrics: [{ date, sessions: 1 }],
          },
        ],
      })
      assert.equal(contact.status, 400)
      assert.deepEqual(
        contact.body.errors.map((e: { path: string }) => e.path),
        ['/contacts/0/metrics/0/date'],
      )
      assert.equal(await uploads(), before)
    })

    test(`${date} is a 400 on single-record create and update`, async () => {
      const created = await a.api('/api/v1/customer', {
        external_id: 'one',
        name: 'One',
        metrics: [{ date, logins: 1 }],
      })
      assert.equal(created.status, 400)
      assert.equal(created.body.errors[0].path, '/metrics/0/date')
      // Made by the first round, there already on the second.
      assert.ok(
        [201, 409].includes(
          (await a.api('/api/v1/customer', { external_id: 'one', name: 'One' })).status,
        ),
      )
      const churned = await a.api(
        '/api/v1/customer/one',
        { is_churned: true, churned_date: date },
        'PUT',
      )
      assert.equal(churned.status, 400)
      assert.equal(churned.body.errors[0].path, '/churned_date')
      const attribute = await a.api(
        '/api/v1/customer/one',
        { attributes: { plan_started: date } },
        'PUT',
      )
      assert.equal(attribute.status, 400)
      assert.equal(attribute.body.errors[0].path, '/attributes/plan_started')
    })

    test(`${date} is a 400 in search values`, async () => {
      for (const operator of ['EQ', 'GT']) {
        const res = await a.api('/api/v1/customers/search', {
          filters: [{ propertyName: 'plan_started', operator, value: date }],
        })
        assert.equal(res.status, 400)
        assert.equal(res.body.errors[0].path, '/filters/0/value')
      }
      const last = await a.api('/api/v1/customers/search', {
        filters: [{ propertyName: 'last_seen', operator: 'IN', values: ['2024-01-01', date] }],
      })
      assert.equal(last.status, 400)
      assert.equal(last.body.errors[0].path, '/filters/0/values/1')
    })
  }

  test('a tracked date attribute that is not a date is a 400, and nothing is stored', async () => {
    await s.admin('PUT', `/accounts/${a.id}/tracking`, { domains: ['acme.test'] })
    const event = (plan: unknown) => ({
      name: 'login',
      timestamp: Date.now(),
      identification: { customer: 'one' },
      data: { customer: { plan_started: plan, country: 'US' } },
    })
    for (const date of ['0000-01-01', '2024-02-30']) {
      const res = await a.api('/api/tracker/track', {
        trackerKey: a.trackerKey,
        events: [event('2024-01-01'), event(date)],
      })
      assert.equal(res.status, 400)
      assert.deepEqual(
        res.body.errors.map((e: { path: string }) => e.path),
        ['/events/1/data/customer/plan_started'],
      )
    }
    assert.equal(
      (await s.sql`select count(*)::int as n from tracking_events where account_id = ${a.id}`)[0].n,
      0,
    )
    // Other values are free-form: a number under a date attribute is ignored when
    // applied, as before.
    assert.equal(
      (
        await a.api('/api/tracker/track', {
          trackerKey: a.trackerKey,
          events: [event('2024-01-01'), event(7)],
        })
      ).status,
      200,
    )
  })

  test('CSV import reports a row with such a date and skips it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dates-'))
    try {
      const file = join(dir, 'c.csv')
      writeFileSync(
        file,
        'external_id,name,date,logins,plan_started\n' +
          'ok,Ok,2024-01-01,3,0001-01-01\nm,M,0000-01-01,3,\np,P,,,2024-02-30\n',
      )
      const errors: string[] = []
      const stats = await importFile(s.app, a.id, 'customers', file, emptyStats(), {
        force: true,
        onRowError: (e) => errors.push(e),
      })
      assert.equal(stats.imported, 1)
      assert.equal(stats.errors, 2)
      assert.match(errors[0], /^line 3, column date: /)
      assert.match(errors[1], /^line 4, column plan_started: /)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the edges of the range are accepted, processed and scored', async () => {
    const upload = await uploadAndWait(
      a.api,
      'customers',
      [
        {
          external_id: 'edge',
          name: 'Edge',
          attributes: { plan_started: '9999-12-31' },
          metrics: [
            { date: '0001-01-01', logins: 1 },
            { date: '9999-12-31', logins: 40 },
            { date: '2024-02-29', logins: 2 },
          ],
        },
      ],
      { scored: true },
    )
    assert.equal(upload.status, 'processed')
    const customer = await a.api('/api/v1/customer/edge', undefined, 'GET')
    assert.equal(customer.body.last_seen, '9999-12-31')
    assert.equal(customer.body.properties.plan_started, '9999-12-31')
  })
})
