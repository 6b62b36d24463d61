-- Scores move out of the records into narrow tables of their own, one row per scored record.
-- A rescoring after a model change rewrites every score of the account: on the wide, ten-index
-- customers table that cost 2.7-3.3 s per 100,000 rows before any scoring (a new row version and
-- an entry in every index, the GIN ones included), and writing each snapshot's engagement beside
-- its values another 3.9 s per 1.2 million snapshots. Here a rescoring writes one narrow row per
-- record (1.0 s per 100,000 with its four score indexes), and the snapshots are only read.
--
-- history_dates/history_scores are the engagement score history (SPEC section 6): one score per
-- scored snapshot date, in date order. The daily run derives the trend window from them without
-- reading a snapshot. The trend is json, not jsonb: building jsonb cost twice as much per record,
-- and the trend is only ever returned whole. A record without a row has no scores (search joins
-- them with LEFT JOIN).
create table customer_scores (
  account_id bigint not null,
  customer_id bigint not null,
  history_dates date[] not null default '{}',
  history_scores integer[] not null default '{}',
  last_seen date,
  engagementscore integer,
  engagementscore_difference integer,
  engagementscore_trend json,
  fitscore integer,
  churn_risk integer,
  upsell_score integer,
  primary key (account_id, customer_id),
  foreign key (account_id, customer_id) references customers on delete cascade
);

create table contact_scores (
  account_id bigint not null,
  contact_id bigint not null,
  history_dates date[] not null default '{}',
  history_scores integer[] not null default '{}',
  last_seen date,
  engagementscore integer,
  engagementscore_difference integer,
  engagementscore_trend json,
  primary key (account_id, contact_id),
  foreign key (account_id, contact_id) references contacts on delete cascade
);

insert into customer_scores
select c.account_id, c.service_id, coalesce(h.dates, '{}'), coalesce(h.scores, '{}'), c.last_seen, c.engagementscore,
  c.engagementscore_difference, c.engagementscore_trend::json, c.fitscore, c.churn_risk, c.upsell_score
from customers c left join lateral (
  select array_agg(s.date order by s.date) as dates, array_agg(s.engagement order by s.date) as scores
  from customer_snapshots s where s.account_id = c.account_id and s.customer_id = c.service_id and s.engagement is not null
) h on true
where h.dates is not null or c.fitscore is not null;

insert into contact_scores
select c.account_id, c.service_id, h.dates, h.scores, c.last_seen, c.engagementscore, c.engagementscore_difference, c.engagementscore_trend::json
from contacts c join lateral (
  select array_agg(s.date order by s.date) as dates, array_agg(s.engagement order by s.date) as scores
  from contact_snapshots s where s.account_id = c.account_id and s.contact_id = c.service_id and s.engagement is not null
) h on h.dates is not null;

-- The search indexes of 003 move with their columns.
create index customer_scores_engagement on customer_scores (account_id, engagementscore);
create index customer_scores_fit on customer_scores (account_id, fitscore);
create index customer_scores_churn_risk on customer_scores (account_id, churn_risk);
create index customer_scores_last_seen on customer_scores (account_id, last_seen);
create index contact_scores_engagement on contact_scores (account_id, engagementscore);
create index contact_scores_last_seen on contact_scores (account_id, last_seen);

alter table customers drop column last_seen, drop column engagementscore, drop column engagementscore_difference,
  drop column engagementscore_trend, drop column fitscore, drop column churn_risk, drop column upsell_score;
alter table contacts drop column last_seen, drop column engagementscore, drop column engagementscore_difference,
  drop column engagementscore_trend;
alter table customer_snapshots drop column engagement;
alter table contact_snapshots drop column engagement;
