-- What an app keeps of run output and attempt bodies, within LEDGERPORT_APP_STORAGE_QUOTA_MB.
--
-- A run's output is what it wrote: its log lines and their times, its result, its error and its
-- stack; output_bytes counts them (UTF-8) as the run was recorded, and output_dropped_at says
-- when they were dropped for the app's quota (the run keeps its row, status and event). An
-- attempt's body is the first 4 KiB of the answer it got; body_dropped_at likewise. Each attempt
-- names its app, so that an app's oldest bodies are one index range.
ALTER TABLE function_runs ADD COLUMN output_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE function_runs ADD COLUMN output_dropped_at DOUBLE PRECISION;
UPDATE function_runs SET output_bytes = COALESCE(octet_length(logs), 0)
    + COALESCE(octet_length(result), 0) + COALESCE(octet_length(error), 0)
    + COALESCE(octet_length(error_stack), 0) + COALESCE(octet_length(log_times), 0)
    WHERE logs IS NOT NULL OR result IS NOT NULL OR error IS NOT NULL;
ALTER TABLE webhook_attempts ADD COLUMN app_id TEXT;
ALTER TABLE webhook_attempts ADD COLUMN body_dropped_at DOUBLE PRECISION;
UPDATE webhook_attempts a SET app_id = d.app_id FROM webhook_deliveries d
    WHERE d.id = a.delivery_id;
ALTER TABLE webhook_attempts ALTER COLUMN app_id SET NOT NULL;

-- An app's oldest output first: only what still holds some is indexed.
CREATE INDEX function_runs_output ON function_runs (app_id, created_at) WHERE output_bytes > 0;
CREATE INDEX webhook_attempts_body ON webhook_attempts (app_id, started_at)
    WHERE length(response_body) > 0;

-- Per app: the bytes kept (kept_bytes, the sum of its runs' output_bytes and its attempts'
-- bodies, changed in the transaction that changes them), and what was dropped for the quota:
-- bytes, runs and attempts in all, and when last.
CREATE TABLE app_storage (
    app_id TEXT PRIMARY KEY REFERENCES apps (id),
    kept_bytes BIGINT NOT NULL DEFAULT 0,
    trimmed_bytes BIGINT NOT NULL DEFAULT 0,
    trimmed_runs BIGINT NOT NULL DEFAULT 0,
    trimmed_attempts BIGINT NOT NULL DEFAULT 0,
    trimmed_at DOUBLE PRECISION
);
INSERT INTO app_storage (app_id, kept_bytes)
    SELECT app_id, SUM(bytes) FROM (
        SELECT app_id, output_bytes AS bytes FROM function_runs WHERE output_bytes > 0
        UNION ALL
        SELECT app_id, length(response_body) AS bytes FROM webhook_attempts
            WHERE length(response_body) > 0
    ) AS kept GROUP BY app_id;
