-- migrate: concurrently
-- A Segment track that names its customer (context.groupId) is stored by the intake straight into
-- tracking_events and applied by the tracker's own apply job, as the tracker's events are: stored once,
-- instead of once as a Segment message and again as an event by the Segment apply job, which kept up
-- with a third of the intake (docs/benchmarks.md, "Segment ingest"). Its messageId comes with it and
-- deduplicates it here, for as long as the event is kept (src/tracking/segment.ts).
alter table tracking_events add column if not exists message_id text collate "C";
create unique index concurrently if not exists tracking_events_message
  on tracking_events (account_id, message_id) where message_id is not null;
