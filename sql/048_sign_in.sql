-- People sign in (docs/security.md, "Sessions"): a user has a role and, once an invite is taken up,
-- a password hash (scrypt, with its parameters in the text).
alter table users add column role text not null default 'viewer' check (role in ('viewer', 'manager', 'admin'));
alter table users add column password_hash text;
-- Sign-in looks an email up before it knows the account: only users who can sign in are indexed.
create index users_sign_in on users (lower(email)) where password_hash is not null;

-- One-use links that set a password: an invite (7 days) or a reset (1 day). Only the SHA-256 of the
-- link's secret is kept.
create table user_tokens (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  user_id bigint not null,
  purpose text not null check (purpose in ('invite', 'reset')),
  secret_hash bytea not null,
  expires_at timestamptz not null,
  used_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (account_id, id),
  foreign key (account_id, user_id) references users on delete cascade
);
create unique index user_tokens_secret on user_tokens (account_id, secret_hash);

-- A signed-in browser: the cookie carries the account id and a secret whose SHA-256 is kept here.
-- Removing the user ends its sessions (the foreign key).
create table sessions (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  user_id bigint not null,
  secret_hash bytea not null,
  created_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  primary key (account_id, id),
  foreign key (account_id, user_id) references users on delete cascade
);
create unique index sessions_secret on sessions (account_id, secret_hash);
create index sessions_user on sessions (account_id, user_id);

-- Failed sign-ins by email, known or not (the lockout must not tell them apart): not per account,
-- so on Citus it stays on the coordinator with the service's other bookkeeping.
create table sign_in_failures (
  email text not null,
  at timestamptz not null default now()
);
create index sign_in_failures_email on sign_in_failures (email, at);
create index sign_in_failures_at on sign_in_failures (at);
