-- migrate: concurrently
-- An erasure finds a person's tracked events by their external ids (src/privacy/erase.ts). The
-- customer's are indexed (sql/001 tracking_events_customer); a contact's were not, so erasing one
-- contact read every event of its account. With this index the delete is a BitmapOr of the two
-- indexes, reading only the person's events (docs/benchmarks.md, "Erasure"). Events without a
-- contact (customer-level ones) are left out of it. tracking_events is a plain table, not
-- partitioned, so the index is built concurrently on it directly.
create index concurrently if not exists tracking_events_contact
  on tracking_events (account_id, contact_external_id) where contact_external_id is not null;
