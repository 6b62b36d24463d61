-- Events beyond customer.created (docs/api.md, "Events").
-- score_alerts: which score changes send customer.score_changed (thresholds and deltas per score).
-- customer_contributions: each customer's rule contributions as of the latest scoring that changed
-- its scores, and the change_drivers of that change; kept only while score alerts are set.
-- rate_limit: deliveries per second to the endpoint; next_send_at is the next free slot, shared by
-- every worker through this row.
alter table accounts add column score_alerts jsonb;

create table customer_contributions (
  account_id bigint not null,
  customer_id bigint not null,
  contributions jsonb not null,
  change_drivers jsonb not null default '[]',
  primary key (account_id, customer_id),
  foreign key (account_id, customer_id) references customers on delete cascade
);

alter table webhooks
  add column rate_limit integer,
  add column next_send_at timestamptz;
