// graphile-worker crontab lines (https://worker.graphile.org/docs/cron); one per recurring task.
export const crontab: string[] = []
