-- The sql/021 trigger on Citus (docs/operations.md, "Running on Citus"): there it fires on a shard of
-- the link table, on the worker that holds it, where the records table is only a name that a
-- worker may not query from inside a shard. A shard's name is its table's with the shard id
-- appended, and the records of its accounts are in the co-located shard of the records table, which
-- the worker names from its copy of the metadata. On a plain PostgreSQL it runs as before.
create or replace function sync_tag_ids() returns trigger language plpgsql as $$
declare
  records text := tg_argv[0];
  key text := tg_argv[1];
  changed text := case tg_op when 'INSERT' then 'new_links' when 'DELETE' then 'old_links'
    else '(select * from new_links union all select * from old_links)' end;
  account bigint;
begin
  if tg_table_name ~ '_[0-9]+$' then
    execute format('select account_id from %s c limit 1', changed) into account;
    if account is null then
      return null;
    end if;
    execute format('select shard_name(%L::regclass, get_shard_id_for_distribution_column(%L, %s))',
      records, records, account) into records;
  else
    records := quote_ident(records);
  end if;
  execute format(
    'select 1 from %s r where (r.account_id, r.service_id) in (select account_id, %I from %s c)
      order by r.account_id, r.service_id for no key update of r', records, key, changed);
  execute format(
    'update %s r set tag_ids = array(select x.tag_id from %I x where x.account_id = r.account_id
        and x.%I = r.service_id order by x.tag_id)
      where (r.account_id, r.service_id) in (select account_id, %I from %s c)',
    records, tg_table_name, key, key, changed);
  return null;
end $$;
