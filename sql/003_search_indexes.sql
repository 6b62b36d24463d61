-- Search indexes, chosen from EXPLAIN ANALYZE of the compiled queries over one account of 1,000,000
-- customers beside a second one (bench/search.ts). Every search reads `where account_id = $1 ...
-- order by external_id limit n+1`; the planner either walks (account_id, external_id) (the unique
-- constraint) and filters, or finds the matches through one of these indexes and sorts them. A walk
-- costs about 2 us per row visited and the index about 6 us per match with the sort, so walking
-- wins for filters matching more than a few records in a thousand; it needs nothing new, and these
-- indexes serve the selective side of each common filter shape. No
-- (account_id, is_churned, external_id): the default active-only filter costs the walk a few rows
-- per page (8 of 109 in the plans), and churned customers are not rare enough to need one.

-- Owner EQ: one owner's customers in external-id order (owner emails are resolved to user ids
-- before compiling), so a small book of business reads only its first page.
create index customers_owner on customers (account_id, owner_user_id, external_id);

-- Tags EQ/IN (tag titles are resolved to ids before compiling): from a rare tag to its records;
-- also serves the foreign-key cascade when a tag is deleted. (010 replaces both with unique
-- (account_id, tag_id, external_id).)
create index customer_tags_tag on customer_tags (account_id, tag_id, customer_id);
create index contact_tags_tag on contact_tags (account_id, tag_id, contact_id);

-- Ranges and EQ on the scores and GTD/LTD on last_seen. The compiler compares these integer columns
-- with integer bounds, so the indexes and the column statistics apply (engagementscore >= 95: 2 s
-- walking, 1.4 ms here).
create index customers_engagement on customers (account_id, engagementscore);
create index customers_fit on customers (account_id, fitscore);
create index customers_churn_risk on customers (account_id, churn_risk);
create index customers_last_seen on customers (account_id, last_seen);
create index contacts_engagement on contacts (account_id, engagementscore);
create index contacts_last_seen on contacts (account_id, last_seen);

-- name EQ/IN: an exact name otherwise costs a sequential scan (0.5 s at a million, 3 ms here).
create index customers_name on customers (account_id, name);
create index contacts_name on contacts (account_id, name);

-- GIN indexes: EQ/IN on custom properties compile to `attributes @> '{"employees": 5000}'` (26
-- matches: 5.4 s walking, 5.5 ms here), and LIKE to `lower(name) like '%...%'`, which a trigram
-- index serves (a name fragment of 0.03%: 1-2 s walking, 25 ms here). account_id leads them too,
-- through btree_gin, as in every index of a tenant table (it costs 2% of the index's size). Both
-- extensions ship with PostgreSQL's contrib and the embedded server and are trusted (a database
-- owner may create them); where they cannot be created the GIN indexes are skipped and those
-- filters walk instead, with the same results. Metrics get no GIN index: their EQ is rare next to
-- ranges, and they change with every snapshot.
do $$
begin
  create extension if not exists btree_gin;
  create extension if not exists pg_trgm;
exception when others then
  raise notice 'search: no btree_gin/pg_trgm (%), so no GIN search indexes', sqlerrm;
end $$;

do $$
begin
  if (select count(*) from pg_extension where extname in ('btree_gin', 'pg_trgm')) = 2 then
    create index customers_attributes on customers using gin (account_id, attributes jsonb_path_ops);
    create index contacts_attributes on contacts using gin (account_id, attributes jsonb_path_ops);
    create index customers_name_trgm on customers using gin (account_id, lower(name) gin_trgm_ops);
    create index contacts_name_trgm on contacts using gin (account_id, lower(name) gin_trgm_ops);
    -- The statistics of lower(name) that LIKE is estimated with come from these indexes.
    alter index customers_name_trgm alter column 2 set statistics 1000;
    alter index contacts_name_trgm alter column 2 set statistics 1000;
  end if;
end $$;

-- Walk or index is decided on the estimated share of matches, and the default 100 statistics
-- entries misjudge the rarer values, both ways: containment of a value under about 1% looked like
-- 0.01% (employees = 7, 1.5%: the GIN index and a sort of 14,000 rows, 93 ms, over a 10 ms walk),
-- and LIKE '%zephyr%' (5%) came out at 11% and 1.2% after two ANALYZE runs and, in one benchmark
-- run, low enough for a trigram scan of 50,000 rows (1.2 s at 8 clients, against 5 ms walking).
-- With 1000 entries both estimate within a few percent, for about 0.2 ms more planning.
alter table customers alter column attributes set statistics 1000;
alter table contacts alter column attributes set statistics 1000;
