// graphile-worker crontab lines (https://worker.graphile.org/docs/cron); one per recurring task.
export const crontab: string[] = [
  // Daily at 01:00 UTC: tracked events -> today's metric snapshots (fans out one job per account).
  '0 1 * * * aggregate_events',
  // Daily at 01:30 UTC: time-dependent scores and automatic churn (fans out one job per account).
  '30 1 * * * score_daily',
]
