-- The audit log (issue 47, docs/security.md "Audit log"): one entry per change made through the API
-- by a key, a user or the operator, written in the change's own transaction (src/http/audit.ts),
-- or after it when the change was refused (status 4xx). It names who (the actor as it was then),
-- what (the route's operation id), on what (the path below its version prefix, as segments, with
-- the id a creation made), when, from where (the client's address; null from the CLI) and the
-- status answered. Kept SERVICE_AUDIT_RETENTION_DAYS days (src/audit/retention.ts); an erasure
-- blanks the target segments that name an erased customer or contact (src/privacy/erase.ts).
create table audit_entries (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  at timestamptz not null default now(),
  actor_type text not null check (actor_type in ('user', 'key', 'operator')),
  actor_id bigint,
  actor_name text,
  action text not null,
  target text[] not null,
  status smallint not null,
  address inet,
  primary key (account_id, id)
);

-- The operator's changes that name no account (backups, an account refused before it existed): not
-- per account, so on Citus this table stays on the coordinator.
create table operator_audit_entries (
  id bigint generated always as identity primary key,
  at timestamptz not null default now(),
  actor_type text not null check (actor_type in ('user', 'key', 'operator')),
  actor_id bigint,
  actor_name text,
  action text not null,
  target text[] not null,
  status smallint not null,
  address inet
);
