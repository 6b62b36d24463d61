-- migrate: concurrently
-- An erasure finds a person's tracked events by their external ids (src/privacy/erase.ts). The
-- customer's are indexed (sql/001 tracking_events_customer); a contact's were not, so erasing one
-- contact read every event of its account. On an account of 1,000,000 events (521 MB of table) the
-- delete of one contact's 20 events took 618 ms and read all 34,000 pages; with this index it is a
-- BitmapOr of the two indexes, 2.0 ms and 26 pages, at 16 MB of index (docs/benchmarks.md).
-- Events without a contact (customer-level ones) are left out of it. tracking_events is a plain
-- table, not partitioned, so the index is built concurrently on it directly.
create index concurrently if not exists tracking_events_contact
  on tracking_events (account_id, contact_external_id) where contact_external_id is not null;
