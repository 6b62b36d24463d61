-- The "This week" report's 11 earlier weeks (docs/api.md, "This week"; src/insights/week.ts): they
-- cost 11 history lookups and 55 aggregates per customer, yet read only the account's customers and
-- customer_scores rows, which change far less often than the report is asked for. Kept per account
-- for the day they end on, with the digest of the row versions they were computed from (the count of
-- rows and the sum of their xmin, per table); a report whose digest differs computes them anew.
create table week_figures (
  account_id bigint primary key references accounts on delete cascade,
  day date not null,
  digest numeric[] not null,
  figures float8[] not null
);
