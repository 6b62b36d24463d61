-- The learned churn probability (issue 48, docs/scoring.md): one model per account, and each
-- customer's probability beside its other scores.
-- - churn_models: the model that serves (model, trained_at, its evaluation) and the state of the
--   latest training (status, started_at, error). A training that fails sets status 'failed' and its
--   error and leaves the serving model as it was.
-- - customer_scores.churn_probability: written when a ready model scores the customer; searched and
--   sorted like the other scores (the index below). The drivers are computed on read from the model.
create table churn_models (
  account_id bigint not null primary key references accounts on delete cascade,
  status text not null check (status in ('training', 'ready', 'failed')),
  started_at timestamptz not null,
  features jsonb,
  error text,
  trained_at timestamptz,
  algorithm text,
  model jsonb,
  evaluation jsonb,
  training jsonb,
  importance jsonb
);

alter table customer_scores add column churn_probability double precision;
create index customer_scores_churn_probability on customer_scores (account_id, churn_probability, external_id);
