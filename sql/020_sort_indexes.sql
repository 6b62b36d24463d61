-- Sorted search pages as index walks, the deep ones included (issue 21; src/search/sql.ts).
--
-- A sorted page's order is its key, then the external ID ascending in both directions. A page after a
-- cursor (value v, external ID e) is the rest of v's tie group (key = v, external ID > e) and then the
-- records beyond v; each part is a range of an index on (account_id, key, external_id) read in its
-- order, so a deep page costs what the first page costs. Before, the external ID lived only in the
-- record: a deep page read the cursor's whole tie group from the (account_id, score) index and sorted
-- it (scores are whole numbers, so a score in the middle of the range is shared by a few thousand
-- records of a large account), 1.36x the first page at 200,000 customers and growing.
--
-- A descending key with ascending external IDs is not a backward walk of an ascending index (that
-- gives descending external IDs within a tie), hence one index per direction.
--
-- The score rows carry their record's external ID, as the tag links do (sql/010): it never changes,
-- and a score row goes with its record (the foreign key cascades), so the copy cannot drift. The
-- (account_id, score) indexes of sql/009 give way to the (account_id, score, external_id) ones, which
-- serve the same filters.
do $$
declare
  t record;
begin
  for t in select * from (values ('customer_scores', 'customers', 'customer_id'),
    ('contact_scores', 'contacts', 'contact_id')) as v (scores, records, key) loop
    execute format('alter table %I add column external_id text collate "C"', t.scores);
    execute format('update %I x set external_id = r.external_id from %I r
      where r.account_id = x.account_id and r.service_id = x.%I', t.scores, t.records, t.key);
    execute format('alter table %I alter column external_id set not null', t.scores);
  end loop;
end $$;

drop index customer_scores_engagement, customer_scores_fit, customer_scores_churn_risk, customer_scores_last_seen,
  contact_scores_engagement, contact_scores_last_seen;

-- Each sortable column with an index (src/search/sql.ts INDEXED_KEYS names the same ones): ascending
-- and descending. Names sort by their bytes (collate "C"), as the compiler orders them; the
-- (account_id, name) index of sql/003 stays for name EQ/IN, which compare in the database's collation.
do $$
declare
  t record;
  d text;
begin
  for t in select * from (values
    ('customer_scores', 'engagement', 'engagementscore'),
    ('customer_scores', 'fit', 'fitscore'),
    ('customer_scores', 'churn_risk', 'churn_risk'),
    ('customer_scores', 'upsell', 'upsell_score'),
    ('customer_scores', 'last_seen', 'last_seen'),
    ('contact_scores', 'engagement', 'engagementscore'),
    ('contact_scores', 'last_seen', 'last_seen'),
    ('customers', 'sort_name', 'name collate "C"'),
    ('customers', 'created', 'created_at'),
    ('customers', 'updated', 'updated_at'),
    ('contacts', 'sort_name', 'name collate "C"'),
    ('contacts', 'created', 'created_at'),
    ('contacts', 'updated', 'updated_at')
  ) as v (tab, name, key) loop
    foreach d in array array['asc', 'desc'] loop
      execute format('create index %I on %I (account_id, %s %s, external_id)', t.tab || '_' || t.name || '_' || d,
        t.tab, t.key, d);
    end loop;
  end loop;
end $$;
