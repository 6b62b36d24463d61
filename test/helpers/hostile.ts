import fc from 'fast-check'

// Hostile strings for every string field of otherwise valid bodies (test/hostile.test.ts, and the
// Segment ingest's messages in test/relay.test.ts), drawn with a fixed seed so the corpus is the
// same on every run.
const nasty = fc.oneof(
  fc.string(),
  fc.constantFrom(
    '\ud800',
    'x\udc00',
    '\u0000',
    '\uffff',
    '\u2028',
    "'; drop table customers; --",
    '%',
    '_',
    '\\',
  ),
  fc.constantFrom('0000-01-01', '2024-02-30', '9999-12-31', '0001-01-01', '1e999', 'NaN', ''),
)
export const hostileRecords = fc.sample(
  fc.record({ id: nasty, name: nasty, country: nasty, date: nasty, plan: nasty, title: nasty }),
  { numRuns: 60, seed: 20261125 },
)
