// The request's fold of an upload's items (src/uploads/fold.ts), on its own: the merge's tests
// (uploads.test.ts) show what it stores, sql/053's test (migrate.test.ts) that SQL folds the same.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { foldItems } from '../src/uploads/fold.ts'
import type { CustomerItem } from '../src/uploads/schemas.ts'

const stored = (items: unknown[]) =>
  JSON.parse(JSON.stringify(foldItems('customers', items as CustomerItem[])))

test('a codename __proto__ is folded as a key, never as a prototype', () => {
  const items = JSON.parse(`[
    {"external_id": "c1", "name": "A", "attributes": {"__proto__": 1},
      "metrics": [{"date": "2026-01-01", "__proto__": 5}]},
    {"external_id": "c1", "name": "B", "attributes": {"__proto__": 2, "x": null},
      "metrics": [{"date": "2026-01-01", "y": 1}]}
  ]`)
  const [record] = stored(items)
  assert.deepEqual(
    JSON.parse(JSON.stringify(record.attributes)),
    JSON.parse('{"__proto__": 2, "x": null}'),
  )
  assert.equal(Object.getPrototypeOf(record.attributes), Object.prototype)
  assert.deepEqual(Object.keys(record.metrics).sort(), ['__proto__', 'y'])
  assert.equal(items[0].attributes.__proto__, 1, "the request's own items are left as they were")
})

test('one record per external id in first-seen order, the last item winning', () => {
  const folded = stored([
    {
      external_id: 'b',
      name: 'B1',
      owner_email: 'o@x.test',
      metrics: [{ date: '2026-02-01', m: 1 }],
    },
    { external_id: 'a', name: 'A' },
    {
      external_id: 'b',
      name: 'B2',
      owner_email: null,
      metrics: [{ date: '2026-01-01', m: 2, n: null }],
    },
  ])
  assert.deepEqual(folded, [
    {
      external_id: 'b',
      name: 'B2',
      owner_email: 'o@x.test',
      metrics: { m: 1 },
      snapshots: { '2026-02-01': { m: 1 }, '2026-01-01': { m: 2, n: null } },
      first_ord: 0,
      item: 2,
    },
    { external_id: 'a', name: 'A', metrics: {}, snapshots: {}, first_ord: 1, item: 1 },
  ])
})
