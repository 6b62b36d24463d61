-- The "This week" report (docs/api.md, "This week"; src/insights/week.ts) is kept fresh in the
-- background instead of being checked against a digest of every row at each request: any statement
-- that inserts, updates or deletes customers or customer_scores rows (the only rows the report reads;
-- customer_churn_events is written by a trigger on customers) enqueues one refresh job per account it
-- touched, in its own transaction, whatever path made the change (uploads, scoring, churn marks,
-- tracking and Segment applies, erasures, deletes, and paths added later). The job key folds the
-- account's writes into one waiting job and keeps its run_at (the first write's, plus 1 s): a steady
-- stream of writes delays the refresh by at most that, never indefinitely. A job that finds no kept
-- report does nothing, so an account nobody asks the report of costs a cheap job per burst of writes.
-- Statement-level triggers, so that a batch of many rows enqueues once; transition tables (one event
-- each, as PostgreSQL requires) name the accounts touched. A restore disables user triggers.
-- computed_ms: how long the last computation took, which paces the next refresh (src/insights/week.ts).
-- Reports kept before were checked against their digest at each request, and a write since may not
-- be in them: none is kept over, the next request computes it.
delete from week_reports;
alter table week_reports drop column digest,
  add column computed_at timestamptz not null default now(),
  add column computed_ms integer not null default 0;

create function enqueue_week_report_refresh() returns trigger language plpgsql as $$
begin
  -- The spec of src/db/jobs.ts weekReportJob, with its delay.
  perform graphile_worker.add_job('refresh_week_report', json_build_object('account_id', t.account_id),
    run_at => clock_timestamp() + interval '1 second', job_key => 'refresh_week_report:' || t.account_id,
    job_key_mode => 'preserve_run_at')
  from (select distinct account_id from changed) t;
  return null;
end $$;

create trigger customers_week_insert after insert on customers referencing new table as changed
  for each statement execute function enqueue_week_report_refresh();
create trigger customers_week_update after update on customers referencing new table as changed
  for each statement execute function enqueue_week_report_refresh();
create trigger customers_week_delete after delete on customers referencing old table as changed
  for each statement execute function enqueue_week_report_refresh();
create trigger customer_scores_week_insert after insert on customer_scores referencing new table as changed
  for each statement execute function enqueue_week_report_refresh();
create trigger customer_scores_week_update after update on customer_scores referencing new table as changed
  for each statement execute function enqueue_week_report_refresh();
create trigger customer_scores_week_delete after delete on customer_scores referencing old table as changed
  for each statement execute function enqueue_week_report_refresh();
