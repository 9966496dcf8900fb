-- The console reads a webhook's deliveries by status, newest first (the list's status filter),
-- and a recovery its failed ones since a moment, oldest first: one index range each, however
-- long the webhook's history.
CREATE INDEX webhook_deliveries_webhook_status
    ON webhook_deliveries (webhook_id, status, created_at);
