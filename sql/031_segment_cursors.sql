-- Applying a Segment message was an UPDATE of its status, and the partial index of received messages
-- named status, so no such UPDATE could be HOT: writing each message's status back was the largest part
-- of an apply batch (docs/benchmarks.md, "Segment ingest"). The apply job now reads its messages from a
-- cursor per account through the primary key (src/tracking/cursor.ts, as the tracker's since
-- 012_tracking_cursors.sql), and a message the cursor has moved past that is still 'received' was
-- applied: only the messages with another outcome (pending, dropped, ignored, a trait named invalid),
-- or that the cursor cannot move past yet, have their status written.
--
-- applied_below: every message of the account with a smaller id is done (applied unless its status
-- says otherwise; a pending one stays pending). check_upto, check_vxids: as in tracking_cursors.
create table segment_cursors (
  account_id bigint primary key references accounts on delete cascade,
  applied_below bigint not null,
  check_upto bigint,
  check_vxids text[]
);

drop index segment_messages_waiting;
