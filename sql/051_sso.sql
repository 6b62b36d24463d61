-- Single sign-on through OpenID Connect, per account (docs/security.md, "SSO mix-up"): the provider
-- the account trusts and which emails it signs in.
create table sso_configs (
  account_id bigint primary key references accounts on delete cascade,
  issuer text not null,
  client_id text not null,
  client_secret text not null,
  domains text[] not null,
  default_role text not null check (default_role in ('viewer', 'manager', 'admin')),
  updated_at timestamptz not null default now()
);

-- A sign-in under way: kept server-side, so the browser carries only `state` (`<account id>.<secret>`,
-- of which only the SHA-256 is kept) and the nonce and PKCE verifier never leave the service. The
-- callback deletes the row as it reads it (one use); it lasts 10 minutes.
create table sso_logins (
  account_id bigint not null references accounts on delete cascade,
  state_hash bytea not null,
  issuer text not null,
  nonce text not null,
  code_verifier text not null,
  expires_at timestamptz not null,
  primary key (account_id, state_hash)
);
create index sso_logins_expires on sso_logins (account_id, expires_at);
