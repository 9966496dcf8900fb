-- Rate limits and lockouts counted in the database, as on PostgreSQL. A SQLite database is served
-- by one process, which counts in memory by default; the table keeps the two schemas alike and
-- lets the database counters run on either backend.

-- One row per budget (or lockout) and key. budget is the catalog's rate limit name, or the
-- lockout's; key a keyed hash of who is counted (never an IP or id in clear). state is JSON:
-- [[bucket, hits], ...] for a budget, {"failures": [time, ...], "until": time} for a lockout.
-- expires_at is when nothing in the row counts any more; older rows are deleted.
CREATE TABLE rate_limits (
    budget TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (budget, key)
);
