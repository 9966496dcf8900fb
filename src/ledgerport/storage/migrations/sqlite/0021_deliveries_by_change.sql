-- Deliveries by the time of their latest change (an attempt's outcome sets it). The count of
-- failing webhooks, made for /metrics every 30 seconds, reads the deliveries that ended in its
-- 15-minute window as one range of this index; without it, it read every delivery the retry
-- schedule could still end (about ten hours of them), which took longer the longer the service
-- ran.
CREATE INDEX webhook_deliveries_updated ON webhook_deliveries (updated_at);
