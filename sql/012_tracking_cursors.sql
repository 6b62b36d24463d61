-- Applying an event is an UPDATE of its status. The partial index of received events named status,
-- so no such UPDATE could be HOT: each wrote a new entry into every index of tracking_events, most
-- of the apply job's time. The job now reads its events from a cursor per account through the
-- primary key (src/tracking/apply.ts), and pages are filled only half by inserts, so that an
-- event's applied version fits on its page beside the received one (new pages only; the space of
-- the old versions is reclaimed by pruning and vacuum).
--
-- applied_below: every event of the account with a smaller id is applied or unmatched and stays so.
-- check_upto, check_vxids: the sequence's last id and the transactions holding a lock on the
-- sequence just after; once none of them runs, every id up to check_upto is committed or gone.
create table tracking_cursors (
  account_id bigint primary key references accounts on delete cascade,
  applied_below bigint not null,
  check_upto bigint,
  check_vxids text[]
);

alter table tracking_events set (fillfactor = 50);
drop index tracking_events_received;
