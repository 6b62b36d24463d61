-- Tag filters read the record's tag ids from the record itself (issue 21). A search page walks the
-- account's records in external-id order and stops at its limit; a tag condition that has to look
-- at the links instead either probes the links of each record walked or, as the planner preferred
-- for several tags or a negated one, reads every link of the tags first (sorted, or hashed), for
-- every page: at 1,000,000 customers, 250-360 ms a page at 8 clients. With the ids on the record
-- the condition is a test of the row the walk already holds. (One tag alone is still found through
-- its links, sql/010: its first links lead straight to the page.)
--
-- The links stay the source of truth: a trigger on the link tables sets the array of every record
-- whose links a statement changed, in that statement, so every writer (the tagging API, a tag's or
-- a record's delete cascading to its links, a seed or an import writing links directly) keeps it in
-- step within its own transaction. The records are locked before their links are read, so two
-- transactions changing one record's links apply one after the other. Ids are sorted, unique.
alter table customers add column tag_ids bigint[] not null default '{}';
alter table contacts add column tag_ids bigint[] not null default '{}';

create function sync_tag_ids() returns trigger language plpgsql as $$
declare
  records text := tg_argv[0];
  key text := tg_argv[1];
  changed text := case tg_op when 'INSERT' then 'new_links' when 'DELETE' then 'old_links'
    else '(select * from new_links union all select * from old_links)' end;
begin
  execute format(
    'select 1 from %I r where (r.account_id, r.service_id) in (select account_id, %I from %s c)
      order by r.account_id, r.service_id for no key update of r', records, key, changed);
  execute format(
    'update %I r set tag_ids = array(select x.tag_id from %I x where x.account_id = r.account_id
        and x.%I = r.service_id order by x.tag_id)
      where (r.account_id, r.service_id) in (select account_id, %I from %s c)',
    records, tg_table_name, key, key, changed);
  return null;
end $$;

create trigger customer_tags_insert after insert on customer_tags referencing new table as new_links
  for each statement execute function sync_tag_ids('customers', 'customer_id');
create trigger customer_tags_delete after delete on customer_tags referencing old table as old_links
  for each statement execute function sync_tag_ids('customers', 'customer_id');
create trigger customer_tags_update after update on customer_tags
  referencing old table as old_links new table as new_links
  for each statement execute function sync_tag_ids('customers', 'customer_id');
create trigger contact_tags_insert after insert on contact_tags referencing new table as new_links
  for each statement execute function sync_tag_ids('contacts', 'contact_id');
create trigger contact_tags_delete after delete on contact_tags referencing old table as old_links
  for each statement execute function sync_tag_ids('contacts', 'contact_id');
create trigger contact_tags_update after update on contact_tags
  referencing old table as old_links new table as new_links
  for each statement execute function sync_tag_ids('contacts', 'contact_id');

update customers r set tag_ids = x.ids
from (select account_id, customer_id, array_agg(tag_id order by tag_id) as ids from customer_tags group by 1, 2) x
where r.account_id = x.account_id and r.service_id = x.customer_id;
update contacts r set tag_ids = x.ids
from (select account_id, contact_id, array_agg(tag_id order by tag_id) as ids from contact_tags group by 1, 2) x
where r.account_id = x.account_id and r.service_id = x.contact_id;

-- Several tags, or a rare one beside other filters, can be found through the ids: a tag id belongs to
-- one account, so the index needs no account_id to serve one account's records.
create index customers_tag_ids on customers using gin (tag_ids);
create index contacts_tag_ids on contacts using gin (tag_ids);

-- A rare LIKE (issue 21): the trigram index of sql/003 led with account_id, and a search always
-- names the account, so the planner made account_id part of every trigram scan and the scan read
-- the account's whole posting list (every record of the account) beside the pattern's trigrams:
-- for a name fragment of 0.2% at 200,000 customers, 20-45 ms in the index against 6-20 ms for the
-- trigrams alone (and 55 ms at 1,000,000). On the names alone the index finds the pattern's records
-- of every account, and the account's are kept from the rows read (a pattern common in other
-- accounts costs their rows too); a pattern common in the account is searched by walking its
-- records, as before (the estimate comes from this index's statistics).
do $$
begin
  if to_regclass('customers_name_trgm') is not null then
    drop index customers_name_trgm;
    create index customers_name_trgm on customers using gin (lower(name) gin_trgm_ops);
    alter index customers_name_trgm alter column 1 set statistics 1000;
  end if;
  if to_regclass('contacts_name_trgm') is not null then
    drop index contacts_name_trgm;
    create index contacts_name_trgm on contacts using gin (lower(name) gin_trgm_ops);
    alter index contacts_name_trgm alter column 1 set statistics 1000;
  end if;
end $$;
