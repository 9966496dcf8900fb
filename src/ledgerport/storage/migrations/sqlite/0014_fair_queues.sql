-- Fair claims: the engine goes round the tenants with due work, so it reads the hot queues by
-- tenant. Each index holds only what waits for an attempt or a run, ordered by tenant and then
-- by when it is due: the tenants with work are found one index step each (a loose scan), and
-- each tenant's oldest due work is one index range, however long another tenant's backlog.
CREATE INDEX webhook_deliveries_app_due ON webhook_deliveries (app_id, next_attempt_at)
    WHERE status IN ('queued', 'retrying');
-- Runs go round apps and, within an app, businesses: the key is the pair ('' for no business).
CREATE INDEX function_runs_tenant_due
    ON function_runs ((app_id || '/' || COALESCE(business_id, '')), next_attempt_at)
    WHERE status IN ('queued', 'retrying');
