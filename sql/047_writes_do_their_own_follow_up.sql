-- No trigger needs the coordinator any more (issue 44): on Citus a trigger on a distributed
-- table fires on the worker that holds the shard, and one on a reference table (accounts) on every
-- node that holds a copy; from there graphile_worker (a coordinator table) does not exist, and a
-- statement on another distributed table is refused ("cannot execute a distributed query from a
-- query on a shard"). The work each started is done by the statements that change the rows, in
-- their transaction, on both engines:
-- - the "This week" report's refresh job (sql/042): every path that writes customers or
--   customer_scores queues it (src/db/jobs.ts addWeekReportRefresh; docs/design.md, "This week");
-- - the churn events (sql/036): the three statements that change is_churned insert them
--   (src/scoring/churn.ts);
-- - an account's tracking events, tracked keys and Segment messages, which have no foreign key to
--   accounts (sql/008, sql/041): no statement of the service deletes an account, and an operator
--   does it with `select delete_account(id)` (docs/operations.md), which removes them first;
-- - the records' tag ids (sql/021) keep a trigger, one for each row (below).
drop trigger customers_week_insert on customers;
drop trigger customers_week_update on customers;
drop trigger customers_week_delete on customers;
drop trigger customer_scores_week_insert on customer_scores;
drop trigger customer_scores_week_update on customer_scores;
drop trigger customer_scores_week_delete on customer_scores;
drop function enqueue_week_report_refresh();

drop trigger customers_churn_events on customers;
drop function record_churn_event();

drop trigger accounts_delete_tracking_events on accounts;
drop function delete_account_tracking_events();
drop trigger accounts_delete_segment_messages on accounts;
drop function delete_account_segment_messages();

-- Run on the coordinator, its statements are ordinary distributed ones, each routed to the
-- account's shard; the delete of the account row cascades to every table with a key to it.
create function delete_account(account bigint) returns boolean language plpgsql as $$
begin
  delete from tracking_events where account_id = account;
  delete from tracked_keys where account_id = account;
  delete from segment_messages where account_id = account;
  delete from accounts where id = account;
  return found;
end $$;

-- The tag ids on each record (sql/021) stay in step with its links by a trigger, whatever writes
-- them (the tagging API, a tag's delete cascading to its links, links written directly), but one
-- for each row now: a statement trigger reads its transition table, which Citus cannot pass to the
-- statements it runs on a shard ("executor could not find named tuplestore"). A row names its
-- account and record, so the trigger's two statements touch the co-located shard it fires on, which
-- Citus runs there. As before, the record is locked first and its links read by the next statement
-- (a snapshot of its own), so that two writers of one record's links apply one after the other.
-- Creating a trigger on a distributed table takes citus.enable_unsafe_triggers (a placeholder
-- setting on a plain PostgreSQL).
set local citus.enable_unsafe_triggers = on;
drop trigger customer_tags_insert on customer_tags;
drop trigger customer_tags_delete on customer_tags;
drop trigger customer_tags_update on customer_tags;
drop trigger contact_tags_insert on contact_tags;
drop trigger contact_tags_delete on contact_tags;
drop trigger contact_tags_update on contact_tags;
drop function sync_tag_ids();

create function sync_record_tag_ids() returns trigger language plpgsql as $$
declare
  records text := tg_argv[0];
  links text := tg_argv[1];
  key text := tg_argv[2];
  link jsonb;
begin
  for link in select jsonb_array_elements(case tg_op when 'INSERT' then jsonb_build_array(to_jsonb(new))
      when 'DELETE' then jsonb_build_array(to_jsonb(old)) else jsonb_build_array(to_jsonb(old), to_jsonb(new)) end)
  loop
    execute format('select 1 from %I where account_id = $1 and service_id = $2 for no key update', records)
      using (link->>'account_id')::bigint, (link->>key)::bigint;
    execute format('update %I r set tag_ids = array(select x.tag_id from %I x where x.account_id = $1 and x.%I = $2
        order by x.tag_id) where r.account_id = $1 and r.service_id = $2', records, links, key)
      using (link->>'account_id')::bigint, (link->>key)::bigint;
  end loop;
  return null;
end $$;

create trigger customer_tags_ids after insert or update or delete on customer_tags
  for each row execute function sync_record_tag_ids('customers', 'customer_tags', 'customer_id');
create trigger contact_tags_ids after insert or update or delete on contact_tags
  for each row execute function sync_record_tag_ids('contacts', 'contact_tags', 'contact_id');
