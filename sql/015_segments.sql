-- Saved segments (docs/design.md, "Segments"): a named customer search body per account, and the
-- membership its recomputation keeps, one row per stay: entered_at when the customer started to
-- match, exited_at when it stopped (null while it is a member). A customer has at most one open
-- stay per segment. customer_id has no foreign key: a deleted customer's stay is closed by the
-- next recomputation, like any other exit, and external_id keeps the history readable after it.
create table segments (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  name text not null,
  body jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  computed_at timestamptz,
  primary key (account_id, id)
);
create unique index segments_name on segments (account_id, name);

create table segment_members (
  account_id bigint not null,
  segment_id bigint not null,
  id bigint generated always as identity,
  customer_id bigint not null,
  external_id text collate "C" not null,
  entered_at timestamptz not null,
  exited_at timestamptz,
  primary key (account_id, segment_id, id),
  foreign key (account_id, segment_id) references segments on delete cascade
);
create unique index segment_members_open on segment_members (account_id, segment_id, customer_id)
  where exited_at is null;
