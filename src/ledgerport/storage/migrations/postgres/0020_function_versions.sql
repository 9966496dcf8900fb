-- A function's active version (version: the one runs use) and its newest (latest_version: the
-- number the next upload follows); they differ once an earlier version is made active again.
-- Every function already keeps the versions it was uploaded with (0009), the active one among
-- them: its newest is its active version.
ALTER TABLE functions ADD COLUMN latest_version INTEGER NOT NULL DEFAULT 0;
UPDATE functions SET latest_version = version;

-- A run: when its handler was called (started_at), when each of its log lines was written
-- (log_times: a JSON array of milliseconds after that, one per line of logs; null for runs
-- ended before they were kept), and the run it replays (replay_of, for a replay).
ALTER TABLE function_runs ADD COLUMN started_at DOUBLE PRECISION;
ALTER TABLE function_runs ADD COLUMN log_times TEXT;
ALTER TABLE function_runs ADD COLUMN replay_of TEXT;

-- The console lists a function's runs by status, newest first.
CREATE INDEX function_runs_function_status ON function_runs (function_id, status, created_at);
