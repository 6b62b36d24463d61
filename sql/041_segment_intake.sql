-- Segment intake appends a hundred rows per request, and the foreign key to accounts checked every
-- row: most of the intake statement's time (docs/benchmarks.md, "Segment ingest"), and a KEY SHARE lock
-- on the account row per row, which concurrent requests of one account turn into multixacts. As for
-- tracking_events (008_tracked_keys.sql): the intake statement inserts only while the account row
-- exists, and the key is replaced by the one thing it still did, removing an account's messages with it.
alter table segment_messages drop constraint segment_messages_account_id_fkey;

create function delete_account_segment_messages() returns trigger language plpgsql as $$
begin
  delete from segment_messages where account_id = old.id;
  return old;
end $$;

create trigger accounts_delete_segment_messages after delete on accounts
  for each row execute function delete_account_segment_messages();
