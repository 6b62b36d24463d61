// The upload lifecycle of src/uploads/lifecycle.ts and its persisted twins in sql/001_init.sql: the
// states the uploads.status check allows, and the predicate of the partial index uploads_pending,
// which the pending and stuck predicates must match for the planner to use it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { connect } from '../src/db/client.ts'
import { migrate } from '../src/db/migrate.ts'
import { PENDING_STATES, UPLOAD_STATES } from '../src/uploads/lifecycle.ts'
import { freshDatabase } from './helpers/db.ts'

const quoted = (text: string) => [...text.matchAll(/'([^']*)'/g)].map((m) => m[1]).sort()

test('the upload states and pending predicate are those of the table and its partial index', async () => {
  const db = await freshDatabase()
  const sql = connect(db.url)
  try {
    await migrate(sql, db.url)
    const [check] = await sql`
      select pg_get_constraintdef(c.oid) as def from pg_constraint c
      where c.conrelid = 'uploads'::regclass and c.contype = 'c'
        and pg_get_constraintdef(c.oid) like '%status%'`
    assert.deepEqual(quoted(check.def), [...UPLOAD_STATES].sort())
    const [index] = await sql`
      select pg_get_expr(i.indpred, i.indrelid) as pred from pg_index i
      where i.indexrelid = 'uploads_pending'::regclass`
    assert.deepEqual(quoted(index.pred), [...PENDING_STATES].sort())
  } finally {
    await sql.end()
    await db.drop()
  }
})
