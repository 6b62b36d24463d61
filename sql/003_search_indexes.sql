-- Search indexes, chosen from EXPLAIN ANALYZE of the compiled queries over one account of 1,000,000
-- customers beside a second one (bench/search.ts). Every search reads `where account_id = $1 ...
-- order by external_id limit n+1`; the planner either walks (account_id, external_id) (the unique
-- constraint) and filters, which wins for filters matching more than about 1% of the account, or
-- finds the matches through one of these indexes and sorts them, which wins below that. The walk
-- needs nothing new; these serve the selective side of each common filter shape.
-- (account_id, is_churned, external_id) was measured and left out: churned customers are a small
-- share, and the walk skips them at the cost of a few rows per page.

-- Owner EQ: one owner's customers in external-id order (owner emails are resolved to user ids
-- before compiling), so a small book of business reads only its first page.
create index customers_owner on customers (account_id, owner_user_id, external_id);

-- Tags EQ/IN (tag titles are resolved to ids before compiling): from a rare tag to its records;
-- also serves the foreign-key cascade when a tag is deleted.
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

-- GIN indexes: EQ/IN on custom properties compile to `attributes @> '{"country": "NZ"}'` (country NZ,
-- 0.3%: 270 ms walking, 20 ms here), and LIKE to `lower(name) like '%...%'`, which a trigram index
-- serves (a rare name fragment: seconds walking, 20 ms here). account_id leads them too, through
-- btree_gin, as every index of a tenant table does. Both extensions ship with PostgreSQL's contrib
-- and the embedded server and are trusted (a database owner may create them); where they cannot be
-- created the GIN indexes are skipped and those filters walk instead, with the same results.
-- Metrics get no GIN index: their EQ is rare next to ranges, and they change with every snapshot.
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
  end if;
end $$;
