-- Secret rotation with a grace period and endpoint health (docs/design.md, "Webhooks in depth").
-- previous_secret still signs deliveries (beside secret) until previous_secret_until.
-- failing_since is when the endpoint's current run of failed attempts began (null after a success);
-- a run as long as SERVICE_WEBHOOK_DISABLE_AFTER_SECONDS, or a 410 Gone, turns active off.
alter table webhooks
  add column previous_secret text,
  add column previous_secret_until timestamptz,
  add column failing_since timestamptz;
