-- Fair claims of deliveries go round apps and, within an app, businesses, as runs do (0014):
-- the hot queue's index is keyed by the pair ('' for no business: a test, an event recorded
-- without one), so the businesses of an app with due deliveries are found one index step each,
-- and each one's oldest due is one index range, however long another business's backlog. It
-- replaces the index by app alone, which nothing else reads.
CREATE INDEX webhook_deliveries_tenant_due
    ON webhook_deliveries ((app_id || '/' || COALESCE(business_id, '')), next_attempt_at)
    WHERE status IN ('queued', 'retrying');
DROP INDEX webhook_deliveries_app_due;
