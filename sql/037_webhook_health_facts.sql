-- Webhook health in the webhooks list (docs/api.md, "Test-send, rate limit, rotation, health and
-- recovery"): the latest failed attempt, kept on the endpoint by the update that already records its
-- run of failures (src/webhooks/health.ts), and who disabled it: the service (after failing for
-- SERVICE_WEBHOOK_DISABLE_AFTER_SECONDS, or at a 410) or the operator. For an endpoint disabled
-- before this migration the answer is inferred: a run of failures still open means the service.
alter table webhooks
  add column disabled_by text check (disabled_by in ('service', 'operator')),
  add column last_failure_at timestamptz,
  add column last_failure_status integer,
  add column last_failure_error text;
update webhooks set disabled_by = case when failing_since is null then 'operator' else 'service' end where not active;
