-- Segment HTTP Tracking API ingest (src/tracking/segment*.ts, docs/api.md "Segment-compatible ingest").
-- segment_messages: each message as the intake read it, one row per messageId (the deduplication),
-- until the apply job has applied, parked or dropped it. `reason` names why a message was dropped
-- or what part of it was (a trait of the wrong type); `detail` says which. Rows that are done are
-- deleted after SEGMENT_KEEP_DAYS (src/tracking/segment.ts), which is the deduplication window.
create table segment_messages (
  account_id bigint not null references accounts on delete cascade,
  id bigint generated always as identity,
  message_id text collate "C" not null,
  type text not null,
  user_id text collate "C",
  group_id text collate "C",
  event text,
  occurred_at timestamptz not null,
  traits jsonb,
  properties jsonb,
  status text not null default 'received' check (status in ('received', 'pending', 'applied', 'ignored', 'dropped')),
  reason text,
  detail text,
  received_at timestamptz not null default now(),
  primary key (account_id, id),
  unique (account_id, message_id)
);
create index segment_messages_waiting on segment_messages (account_id, id) where status = 'received';
create index segment_messages_pending on segment_messages (account_id, user_id) where status = 'pending';
create index segment_messages_errors on segment_messages (account_id, id) where reason is not null;

-- The account's running counts for its ingest status: kind 'type' (messages by type), 'reason'
-- (dropped by reason), 'customer_key' / 'contact_key' (trait keys dropped, by key; at most
-- SEGMENT_MAX_KEY_NAMES keys an account).
create table segment_counts (
  account_id bigint not null references accounts on delete cascade,
  kind text not null,
  key text collate "C" not null,
  count bigint not null,
  primary key (account_id, kind, key)
);
