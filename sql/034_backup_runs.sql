-- One row per backup the service made or failed to make, scheduled or asked for through the admin
-- API (src/backups/), for /metrics. A row is written when the backup ends, so a backup's own
-- snapshot never holds it half-done.
create table backup_runs (
  id bigint generated always as identity primary key,
  origin text not null check (origin in ('schedule', 'api')),
  started_at timestamptz not null,
  finished_at timestamptz not null default now(),
  -- The file's name in its folder and its size; null when it failed.
  file text,
  bytes bigint,
  error text
);
