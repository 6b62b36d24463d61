-- The start of each attempt's response body (src/webhooks/send.ts, EXCERPT_CHARACTERS), so that the
-- delivery log shows why a receiver refused.
alter table webhook_attempts add column response_excerpt text;
