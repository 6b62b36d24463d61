-- Tag links carry their record's external id, so that a tag filter can walk one tag's records in
-- external-id order, the order of every search page. A page of a tag then reads its first links and
-- their records only; before, the search walked the account's records in that order and probed each
-- one's tags (a 1% tag: 29 ms per page on one account of 1,000,000 customers, now 2.7 ms; with a
-- churn_risk filter beside it 78 ms, now 4.8 ms). A record's external id never changes (records are
-- found and merged by it), and a link goes with its record (the foreign key cascades), so the copy
-- cannot drift. The unique index replaces the (account_id, tag_id, record) one: it serves the same
-- lookups and the tag's foreign-key cascade, and its uniqueness lets the planner read the links as
-- the outer side of a plain join.
do $$
declare
  t record;
begin
  for t in select * from (values
    ('customer_tags', 'customers', 'customer_id', 'customer_tags_tag'),
    ('contact_tags', 'contacts', 'contact_id', 'contact_tags_tag')
  ) as v (links, records, key, index) loop
    execute format('alter table %I add column external_id text collate "C"', t.links);
    execute format('update %I x set external_id = r.external_id from %I r
      where r.account_id = x.account_id and r.service_id = x.%I', t.links, t.records, t.key);
    execute format('alter table %I alter column external_id set not null', t.links);
    execute format('drop index %I', t.index);
    execute format('create unique index %I on %I (account_id, tag_id, external_id)', t.index, t.links);
  end loop;
end $$;
