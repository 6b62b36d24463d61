-- Privacy (issue 36, docs/security.md "Privacy"): erasure requests, suppressions, retention.
--
-- erasures: the erasure log. It holds no personal data: the key that asked (null: the admin API),
-- when, how many people were named, and the counts per kind of row removed or redacted. It is kept
-- for the account's lifetime (it goes with the account), as the record that requests were honoured.
create table erasures (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  key_id bigint,
  requested_at timestamptz not null default now(),
  status text not null default 'pending' check (status in ('pending', 'done', 'failed')),
  finished_at timestamptz,
  requested jsonb not null,
  counts jsonb not null default '{}',
  primary key (account_id, id)
);

-- Whom a pending erasure names. The erasure's job reads them and deletes them in the transaction
-- that erases, so the names live no longer than the request; the job's payload carries only ids.
-- contact_external_id null: the customer with all its contacts.
create table erasure_targets (
  account_id bigint not null,
  erasure_id bigint not null,
  id bigint generated always as identity,
  customer_external_id text collate "C" not null,
  contact_external_id text collate "C",
  primary key (account_id, erasure_id, id),
  foreign key (account_id, erasure_id) references erasures on delete cascade
);

-- External ids whose tracked events are dropped (src/tracking/suppressions.ts). Only the SHA-256 of
-- the external id is kept, so that the suppression itself does not name the person; it is lifted by
-- naming the external id again. dropped counts the events dropped since.
create table suppressions (
  account_id bigint not null references accounts on delete cascade,
  entity text not null check (entity in ('customer', 'contact')),
  hash bytea not null,
  erasure_id bigint,
  created_at timestamptz not null default now(),
  dropped bigint not null default 0,
  primary key (account_id, entity, hash)
);

-- What the daily retention run purged in all, and the oldest row it kept, for /metrics.
create table retention_runs (
  kind text primary key check (kind in ('events', 'deliveries')),
  purged bigint not null default 0,
  oldest_kept timestamptz,
  ran_at timestamptz not null
);

-- A delivery's payload is dropped (null) when it is past SERVICE_DELIVERY_RETENTION_DAYS or carried
-- an erased person; the row, its status and its attempts' timing stay. The retention run walks the
-- deliveries that still hold one, oldest first, through this index.
alter table webhook_deliveries alter column payload drop not null;
create index webhook_deliveries_payload on webhook_deliveries (account_id, id) where payload is not null;
