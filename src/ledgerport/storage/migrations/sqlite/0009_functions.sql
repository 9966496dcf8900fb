-- Hosted functions, their versions, and their runs.

-- A hosted function of an app: its name (unique among the app's functions not deleted), the
-- event types it runs on (a JSON array, in the order the developer gave them) and its latest
-- version, the one that runs. A deleted function keeps its row (deleted_at set): its runs stay
-- listed until they age out, and runs still queued for it fail unrun.
CREATE TABLE functions (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    name TEXT NOT NULL,
    events TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    deleted_at REAL
);
CREATE UNIQUE INDEX functions_app_name ON functions (app_id, name) WHERE deleted_at IS NULL;

-- Every uploaded version of a function: the ES module as uploaded and the script it was turned
-- into for the runtime (apps/_module_source.py).
CREATE TABLE function_versions (
    function_id TEXT NOT NULL REFERENCES functions (id),
    version INTEGER NOT NULL,
    source TEXT NOT NULL,
    script TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (function_id, version)
);

-- One run of a function for one event. body is the event as the handler receives it (the
-- webhook delivery body's shape). status: queued, retrying (the platform failed the run: a
-- worker died or the process stopped), succeeded or failed (the handler threw, or broke a
-- limit). next_attempt_at and lease work as for webhook deliveries: the hot queue holds queued
-- and retrying runs only. logs is a JSON array of lines, result the handler's answer as JSON.
CREATE TABLE function_runs (
    id TEXT PRIMARY KEY,
    function_id TEXT NOT NULL REFERENCES functions (id),
    app_id TEXT NOT NULL REFERENCES apps (id),
    event_id TEXT,
    business_id TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'retrying', 'succeeded', 'failed')),
    attempts INTEGER NOT NULL,
    version INTEGER,
    duration_ms REAL,
    logs TEXT,
    error TEXT,
    result TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    next_attempt_at REAL,
    lease TEXT
);
CREATE INDEX function_runs_due ON function_runs (next_attempt_at)
    WHERE status IN ('queued', 'retrying');
CREATE INDEX function_runs_function ON function_runs (function_id, created_at);
CREATE INDEX function_runs_created ON function_runs (created_at);
CREATE INDEX function_runs_lease ON function_runs (lease) WHERE lease IS NOT NULL;
