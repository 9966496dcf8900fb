-- Deliveries by the time of their latest change (an attempt's outcome sets it). The count of
-- failing webhooks, made for /metrics every 30 seconds, reads the deliveries that ended in its
-- 15-minute window as one range of this index. Without it, SQLite read the whole history kept
-- (30 days) in the order of the index on the webhook, and PostgreSQL the ten hours the retry
-- schedule reaches: longer and longer as the service ran.
CREATE INDEX webhook_deliveries_updated ON webhook_deliveries (updated_at);
