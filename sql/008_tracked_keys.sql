-- Tracking intake appends a hundred rows per request. A foreign key to accounts checks every row
-- and takes a KEY SHARE lock on the account row for each, which concurrent requests of one account
-- turn into multixacts; the intake statement already inserts only when the account row exists, so
-- the key is replaced by the one thing it still did: removing an account's events with it (and the
-- tracked_keys below, which have no key either).
alter table tracking_events drop constraint tracking_events_account_id_fkey;

create function delete_account_tracking_events() returns trigger language plpgsql as $$
begin
  delete from tracking_events where account_id = old.id;
  delete from tracked_keys where account_id = old.id;
  return old;
end $$;

create trigger accounts_delete_tracking_events after delete on accounts
  for each row execute function delete_account_tracking_events();

-- For each (record, key) that tracking has set: the time and id of the event whose value was
-- applied. A later-arriving event with an older timestamp is compared with it in one index lookup
-- and does not overwrite newer data. entity is 'customer' or 'contact' (their ids come from
-- different sequences); contact_name counts as a key of the contact.
create table tracked_keys (
  account_id bigint not null,
  entity text not null check (entity in ('customer', 'contact')),
  record_id bigint not null,
  key text collate "C" not null,
  occurred_at timestamptz not null,
  event_id bigint not null,
  primary key (account_id, entity, record_id, key)
);

-- The apply job's way to the events still to apply (only they are in it, so a job never reads
-- through the events already applied).
create index tracking_events_received on tracking_events (account_id, id) where status = 'received';
