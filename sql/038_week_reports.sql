-- The "This week" report (docs/api.md, "This week"; src/insights/week.ts) costs a few passes over
-- every customer of the account (the 12 weeks alone 11 history lookups and 60 aggregates each), yet
-- reads only the account's customers and customer_scores rows, which change far less often than the
-- console's home view asks for it. Its rows are kept per account and period for the day they were
-- computed on, with a digest of the row versions they were computed from (the count of rows and the
-- sum and sum of squares of their xmin, per table); a report whose digest differs is computed anew.
-- The drivers of its listed customers are not kept: they follow the model and the labels.
create table week_reports (
  account_id bigint not null references accounts on delete cascade,
  days integer not null,
  day date not null,
  digest numeric[] not null,
  moves jsonb not null,
  renewing jsonb not null,
  figures float8[] not null,
  primary key (account_id, days)
);
