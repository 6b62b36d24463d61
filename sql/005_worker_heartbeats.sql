-- Liveness of graphile-worker pools and workers, so that jobs locked by a process that died
-- (SIGKILL, lost machine) are unlocked within a minute instead of graphile-worker's 4 hours
-- (src/jobs/recovery.ts). Not tenant data: one row per worker id of every running process.
create unlogged table worker_heartbeats (
  worker_id text primary key,
  seen_at timestamptz not null
);
