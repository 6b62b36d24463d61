-- The "This week" report (docs/api.md, "This week") lists who churned and who came back in a period.
-- A churn keeps its date on the customer (churned_date), but a reactivation clears it and leaves no
-- trace, so every change of is_churned is kept here, by a trigger on customers: the three paths that
-- change it (a single-record write, the daily inactive churn and its lift at scoring) and any later
-- one record it without knowing of this table. The trigger's WHEN test runs for every updated row;
-- its function only for the rare rows whose churn state changed. `day` is the churn date for a
-- churn (it may be set in the past) and the UTC date of the change for a reactivation.
create table customer_churn_events (
  account_id bigint not null,
  customer_id bigint not null,
  id bigint generated always as identity,
  churned boolean not null,
  day date not null,
  reason text,
  primary key (account_id, customer_id, id),
  foreign key (account_id, customer_id) references customers on delete cascade
);
create index customer_churn_events_day on customer_churn_events (account_id, day);

create function record_churn_event() returns trigger language plpgsql as $$
begin
  insert into customer_churn_events (account_id, customer_id, churned, day, reason)
  values (new.account_id, new.service_id, new.is_churned,
    case when new.is_churned then coalesce(new.churned_date, (now() at time zone 'utc')::date)
      else (now() at time zone 'utc')::date end,
    case when new.is_churned then new.churn_reason else old.churn_reason end);
  return null;
end $$;

create trigger customers_churn_events after update of is_churned on customers
  for each row when (old.is_churned is distinct from new.is_churned) execute function record_churn_event();
