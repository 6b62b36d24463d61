-- No trigger of these needs the coordinator any more (issue 44): on Citus a trigger on a distributed
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
--   does it with `select delete_account(id)` (docs/operations.md), which removes them first.
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
