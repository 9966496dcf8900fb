-- What an app keeps of run output and attempt bodies, within LEDGERPORT_APP_STORAGE_QUOTA_MB.
--
-- A run's output is what it wrote: its log lines and their times, its result, its error and its
-- stack; output_bytes counts them (UTF-8) as the run was recorded, and output_dropped_at says
-- when they were dropped for the app's quota (the run keeps its row, status and event). An
-- attempt's body is the first 4 KiB of the answer it got; body_dropped_at likewise. Each attempt
-- names its app, so that an app's oldest bodies are one index range.
ALTER TABLE function_runs ADD COLUMN output_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE function_runs ADD COLUMN output_dropped_at REAL;
UPDATE function_runs SET output_bytes = COALESCE(length(CAST(logs AS BLOB)), 0)
    + COALESCE(length(CAST(result AS BLOB)), 0) + COALESCE(length(CAST(error AS BLOB)), 0)
    + COALESCE(length(CAST(error_stack AS BLOB)), 0)
    + COALESCE(length(CAST(log_times AS BLOB)), 0);
ALTER TABLE webhook_attempts ADD COLUMN app_id TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_attempts ADD COLUMN body_dropped_at REAL;
UPDATE webhook_attempts SET app_id = (
    SELECT d.app_id FROM webhook_deliveries d WHERE d.id = webhook_attempts.delivery_id
);

-- An app's oldest output first: only what still holds some is indexed.
CREATE INDEX function_runs_output ON function_runs (app_id, created_at) WHERE output_bytes > 0;
CREATE INDEX webhook_attempts_body ON webhook_attempts (app_id, started_at)
    WHERE length(response_body) > 0;

-- Per app: the bytes kept (kept_bytes, the sum of its runs' output_bytes and its attempts'
-- bodies, changed in the transaction that changes them), and what was dropped for the quota:
-- bytes, runs and attempts in all, and when last.
CREATE TABLE app_storage (
    app_id TEXT PRIMARY KEY REFERENCES apps (id),
    kept_bytes INTEGER NOT NULL DEFAULT 0,
    trimmed_bytes INTEGER NOT NULL DEFAULT 0,
    trimmed_runs INTEGER NOT NULL DEFAULT 0,
    trimmed_attempts INTEGER NOT NULL DEFAULT 0,
    trimmed_at REAL
);
INSERT INTO app_storage (app_id, kept_bytes)
    SELECT app_id, SUM(bytes) FROM (
        SELECT app_id, output_bytes AS bytes FROM function_runs WHERE output_bytes > 0
        UNION ALL
        SELECT app_id, length(response_body) AS bytes FROM webhook_attempts
            WHERE length(response_body) > 0
    ) GROUP BY app_id;
