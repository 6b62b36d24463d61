-- migrate: concurrently
-- Sorted search pages as index walks, the deep ones included (issue 21; src/search/sql.ts).
--
-- A sorted page's order is its key, then the external ID ascending in both directions. A page after a
-- cursor (value v, external ID e) is the rest of v's tie group (key = v, external ID > e), then the
-- records beyond v; each part is a range of an index on (account_id, key, external_id) read in its
-- order, so a deep page costs what the first page costs. Before, the external ID lived only in the
-- record: a deep page read the cursor's whole tie group from the (account_id, score) index and sorted
-- it (scores are whole numbers, so a score in the middle of the range is shared by a few thousand
-- records of a large account), 1.36x the first page at 200,000 customers and growing with the account.
-- One ascending index per key: a descending key reads its next ties forwards, one by one (sql.ts
-- splitPage). An index per direction (14 on the score rows) made the write floor of a rescoring, a
-- bare UPDATE of every score row, 5.5 times slower (7.1 s against 1.3 s for 30,000 customers, on a
-- loaded machine), and would have doubled what the new indexes add to every write of a record.
--
-- The score rows carry their record's external ID, as the tag links do (sql/010): it never changes,
-- and a score row goes with its record (the foreign key cascades), so the copy cannot drift. The
-- (account_id, score) indexes of sql/009 give way to the (account_id, score, external_id) ones, which
-- serve the same filters. Names sort by their bytes (collate "C"), as the compiler orders them; the
-- (account_id, name) index of sql/003 stays for name EQ/IN, which compare in the database's collation.
-- src/search/sql.ts INDEXED_KEYS names the keys indexed here.
--
-- Statement by statement (docs/operations.md), each one safe to run again after a crash.
alter table customer_scores add column if not exists external_id text collate "C";
update customer_scores x set external_id = r.external_id from customers r
  where x.external_id is null and r.account_id = x.account_id and r.service_id = x.customer_id;
alter table customer_scores alter column external_id set not null;
alter table contact_scores add column if not exists external_id text collate "C";
update contact_scores x set external_id = r.external_id from contacts r
  where x.external_id is null and r.account_id = x.account_id and r.service_id = x.contact_id;
alter table contact_scores alter column external_id set not null;
create index concurrently if not exists customer_scores_engagement_keyset
  on customer_scores (account_id, engagementscore, external_id);
create index concurrently if not exists customer_scores_fit_keyset
  on customer_scores (account_id, fitscore, external_id);
create index concurrently if not exists customer_scores_churn_risk_keyset
  on customer_scores (account_id, churn_risk, external_id);
create index concurrently if not exists customer_scores_last_seen_keyset
  on customer_scores (account_id, last_seen, external_id);
create index concurrently if not exists contact_scores_engagement_keyset
  on contact_scores (account_id, engagementscore, external_id);
create index concurrently if not exists contact_scores_last_seen_keyset
  on contact_scores (account_id, last_seen, external_id);
create index concurrently if not exists customers_sort_name_keyset
  on customers (account_id, name collate "C", external_id);
create index concurrently if not exists customers_created_keyset
  on customers (account_id, created_at, external_id);
create index concurrently if not exists customers_updated_keyset
  on customers (account_id, updated_at, external_id);
create index concurrently if not exists contacts_sort_name_keyset
  on contacts (account_id, name collate "C", external_id);
create index concurrently if not exists contacts_created_keyset
  on contacts (account_id, created_at, external_id);
create index concurrently if not exists contacts_updated_keyset
  on contacts (account_id, updated_at, external_id);
drop index concurrently if exists customer_scores_engagement;
drop index concurrently if exists customer_scores_fit;
drop index concurrently if exists customer_scores_churn_risk;
drop index concurrently if exists customer_scores_last_seen;
drop index concurrently if exists contact_scores_engagement;
drop index concurrently if exists contact_scores_last_seen;
