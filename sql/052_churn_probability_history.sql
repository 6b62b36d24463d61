-- The learned churn probability's history (docs/scoring.md, "Learned churn probability"): "This
-- week" lists the customers whose probability rose most over its period, which needs each one's
-- probability on the period's first day. Kept like the engagement history (sql/009), in the score
-- row itself: one probability per day it changed on (the day's last), in date order, so that a
-- binary search of the dates (width_bucket) reads it as of any day, and an erasure or an export of
-- the score row takes it along. A write keeps only what a 30-day report reads: the entries of the
-- last 30 days and the one before them (src/scoring/churn.ts writeProbabilities).
alter table customer_scores add column churn_history_dates date[] not null default '{}',
  add column churn_history float8[] not null default '{}';

-- The probabilities written before are known from today on.
update customer_scores set churn_history_dates = array[(now() at time zone 'utc')::date],
  churn_history = array[churn_probability]
where churn_probability is not null;

-- The rises of a kept report. The reports kept before have none: none is kept over, the next request
-- computes it anew (as sql/042 did).
delete from week_reports;
alter table week_reports add column rises jsonb not null default '[]';
