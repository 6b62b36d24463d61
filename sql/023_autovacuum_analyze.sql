-- Autovacuum re-analyzes a table after 50 rows plus a tenth of it have changed: 120,000 snapshot
-- rows beside an account of 100,000 customers, so a new account's first uploads may never be seen
-- (docs/design.md, "Statistics"). Scoring analyzes a table an account has outgrown before the upload
-- is marked scored; these thresholds are the backstop for the growth scoring does not follow (tags
-- set one by one, segment membership, updates) and keep autovacuum's analyses cheap to trigger
-- on the tables every read joins: a fiftieth of a table, at least 500 rows.
alter table customers set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table customer_snapshots set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table customer_scores set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table customer_tags set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table contacts set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table contact_snapshots set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table contact_scores set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table contact_tags set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
alter table segment_members set (autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 500);
