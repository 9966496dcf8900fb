-- Hosted functions' health, as endpoints have theirs (webhook_health_hours): kept as runs end, in
-- the transaction that records them (queues/_function_health.py), never counted by scanning the
-- runs.

-- A function's last run ended (succeeded or failed for good: its id, when it ended, how) and its
-- last error (of a run that failed for good, or of an attempt the platform will try again: its
-- first 300 characters, when, and the run's id). A newer end replaces an older one, whatever
-- order their transactions commit in.
CREATE TABLE function_health (
    function_id TEXT PRIMARY KEY REFERENCES functions (id) ON DELETE CASCADE,
    last_run_id TEXT,
    last_run_at DOUBLE PRECISION,
    last_run_status TEXT,
    last_error TEXT,
    last_error_at DOUBLE PRECISION,
    last_error_run_id TEXT
);

-- Runs ended per function and hour (hour: unix seconds // 3600), succeeded and failed for good;
-- the health's last 24 hours sum the newest 24.
CREATE TABLE function_health_hours (
    function_id TEXT NOT NULL REFERENCES functions (id) ON DELETE CASCADE,
    hour BIGINT NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (function_id, hour)
);

-- What the runs kept so far say, so that the health is true from now on: the hours of the runs
-- ended (those older than the window go with the next cleanup), each function's last run ended,
-- and its last error (a run given back unattempted has no duration and made none).
INSERT INTO function_health_hours (function_id, hour, succeeded, failed)
SELECT function_id, floor(updated_at / 3600)::bigint,
    COUNT(*) FILTER (WHERE status = 'succeeded'), COUNT(*) FILTER (WHERE status = 'failed')
FROM function_runs WHERE status IN ('succeeded', 'failed')
GROUP BY function_id, floor(updated_at / 3600)::bigint;
INSERT INTO function_health (function_id, last_run_id, last_run_at, last_run_status)
SELECT function_id, id, updated_at, status FROM (
    SELECT function_id, id, updated_at, status, ROW_NUMBER() OVER (
        PARTITION BY function_id ORDER BY updated_at DESC, id DESC) AS n
    FROM function_runs WHERE status IN ('succeeded', 'failed')
) AS ended WHERE n = 1;
INSERT INTO function_health (function_id, last_error, last_error_at, last_error_run_id)
SELECT function_id,
    CASE WHEN length(error) > 300 THEN substr(error, 1, 300) || chr(8230) ELSE error END,
    updated_at, id
FROM (
    SELECT function_id, id, error, updated_at, ROW_NUMBER() OVER (
        PARTITION BY function_id ORDER BY updated_at DESC, id DESC) AS n
    FROM function_runs
    WHERE error IS NOT NULL AND (status = 'failed' OR duration_ms IS NOT NULL)
) AS erred WHERE n = 1
ON CONFLICT (function_id) DO UPDATE SET last_error = excluded.last_error,
    last_error_at = excluded.last_error_at, last_error_run_id = excluded.last_error_run_id;
