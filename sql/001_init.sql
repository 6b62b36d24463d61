-- Every tenant table leads its primary key and indexes with account_id, so the schema can be
-- distributed by account_id (Citus-style) without change. Record ids come from global identity
-- sequences; they are unique on their own but always looked up together with account_id.

create table accounts (
  id bigint generated always as identity primary key,
  name text not null,
  source_of_truth text not null default 'API',
  tracker_key text not null unique,
  tracking_domains text[] not null default '{}',
  created_at timestamptz not null default now()
);

-- The account id is part of the token (sk_<account>_<secret>), so a key is found by
-- (account_id, token_hash) without a cross-tenant index.
create table api_keys (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  name text,
  scopes text[] not null,
  token_hash bytea not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  primary key (account_id, id),
  unique (account_id, token_hash)
);

create table users (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  email text not null,
  name text,
  created_at timestamptz not null default now(),
  primary key (account_id, id)
);
create unique index users_email on users (account_id, lower(email));

create table tags (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  title text not null,
  color text,
  created_at timestamptz not null default now(),
  primary key (account_id, id)
);
create unique index tags_title on tags (account_id, lower(title));

create table property_defs (
  account_id bigint not null references accounts on delete cascade,
  entity text not null check (entity in ('customer', 'contact')),
  codename text collate "C" not null,
  kind text not null check (kind in ('attribute', 'metric')),
  type text not null check (type in ('string', 'number', 'boolean', 'date')),
  name text,
  system boolean not null default false,
  created_at timestamptz not null default now(),
  primary key (account_id, entity, codename)
);

create table scoring_models (
  account_id bigint primary key references accounts on delete cascade,
  model jsonb not null,
  updated_at timestamptz not null default now()
);

create table webhooks (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  url text not null,
  events text[] not null,
  name text,
  active boolean not null default true,
  secret text not null,
  created_at timestamptz not null default now(),
  primary key (account_id, id)
);

-- attributes: current attribute values; metrics: each metric's value in its latest snapshot.
-- Scores are stored so that search reads them without recomputing.
create table customers (
  account_id bigint not null references accounts on delete cascade,
  service_id bigint generated always as identity,
  external_id text collate "C" not null,
  name text,
  owner_user_id bigint,
  attributes jsonb not null default '{}',
  metrics jsonb not null default '{}',
  engagementscore integer,
  engagementscore_difference integer,
  engagementscore_trend jsonb,
  fitscore integer,
  churn_risk integer,
  upsell_score integer,
  last_seen date,
  is_churned boolean not null default false,
  churned_date date,
  churn_reason text check (churn_reason in ('manual', 'inactive')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (account_id, service_id),
  unique (account_id, external_id)
);

-- One row per (record, snapshot date): the metric values of that date and its engagement score.
create table customer_snapshots (
  account_id bigint not null,
  customer_id bigint not null,
  date date not null,
  "values" jsonb not null default '{}',
  engagement integer,
  primary key (account_id, customer_id, date),
  foreign key (account_id, customer_id) references customers on delete cascade
);

create table customer_tags (
  account_id bigint not null,
  customer_id bigint not null,
  tag_id bigint not null,
  primary key (account_id, customer_id, tag_id),
  foreign key (account_id, customer_id) references customers on delete cascade,
  foreign key (account_id, tag_id) references tags on delete cascade
);

create table contacts (
  account_id bigint not null references accounts on delete cascade,
  service_id bigint generated always as identity,
  external_id text collate "C" not null,
  customer_id bigint not null,
  name text,
  attributes jsonb not null default '{}',
  metrics jsonb not null default '{}',
  engagementscore integer,
  engagementscore_difference integer,
  engagementscore_trend jsonb,
  last_seen date,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (account_id, service_id),
  unique (account_id, external_id),
  foreign key (account_id, customer_id) references customers on delete cascade
);
create index contacts_customer on contacts (account_id, customer_id);

create table contact_snapshots (
  account_id bigint not null,
  contact_id bigint not null,
  date date not null,
  "values" jsonb not null default '{}',
  engagement integer,
  primary key (account_id, contact_id, date),
  foreign key (account_id, contact_id) references contacts on delete cascade
);

create table contact_tags (
  account_id bigint not null,
  contact_id bigint not null,
  tag_id bigint not null,
  primary key (account_id, contact_id, tag_id),
  foreign key (account_id, contact_id) references contacts on delete cascade,
  foreign key (account_id, tag_id) references tags on delete cascade
);

create table uploads (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  kind text not null check (kind in ('customers', 'contacts')),
  source text not null,
  status text not null default 'received'
    check (status in ('received', 'processing', 'processed', 'failed')),
  items jsonb,
  item_count integer not null,
  created integer not null default 0,
  updated integer not null default 0,
  ignored integer not null default 0,
  dropped_keys integer not null default 0,
  warnings jsonb not null default '[]',
  error text,
  received_at timestamptz not null default now(),
  processed_at timestamptz,
  scored_at timestamptz,
  primary key (account_id, id)
);
create index uploads_pending on uploads (account_id) where status in ('received', 'processing');

create table notifications (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  user_id bigint not null,
  kind text not null,
  body jsonb not null,
  created_at timestamptz not null default now(),
  primary key (account_id, id),
  foreign key (account_id, user_id) references users on delete cascade
);

create table tracking_events (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  name text not null,
  occurred_at timestamptz not null,
  customer_external_id text collate "C" not null,
  contact_external_id text collate "C",
  data jsonb,
  customer_id bigint,
  contact_id bigint,
  status text not null default 'received' check (status in ('received', 'applied', 'unmatched')),
  received_at timestamptz not null default now(),
  primary key (account_id, id)
);
create index tracking_events_customer on tracking_events (account_id, customer_external_id, occurred_at);
create index tracking_events_name on tracking_events (account_id, name, occurred_at);

-- Transactional outbox: the payload bytes are frozen when the customers are inserted.
create table webhook_deliveries (
  account_id bigint not null,
  id bigint generated always as identity,
  webhook_id bigint not null,
  event text not null,
  message_id text not null,
  payload text not null,
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
  created_at timestamptz not null default now(),
  delivered_at timestamptz,
  primary key (account_id, id),
  foreign key (account_id, webhook_id) references webhooks on delete cascade
);
create index webhook_deliveries_webhook on webhook_deliveries (account_id, webhook_id, id);

create table webhook_attempts (
  account_id bigint not null,
  delivery_id bigint not null,
  attempt integer not null,
  at timestamptz not null default now(),
  status_code integer,
  duration_ms integer not null,
  error text,
  primary key (account_id, delivery_id, attempt),
  foreign key (account_id, delivery_id) references webhook_deliveries on delete cascade
);

-- Fixed-window request counters, shared by every server process.
create unlogged table rate_limit_counters (
  account_id bigint not null,
  key_id bigint not null,
  bucket text not null,
  window_start timestamptz not null,
  count integer not null,
  primary key (account_id, key_id, bucket, window_start)
);
