-- Hosted functions that call other services (contract.md, third round): an app's secrets, and the
-- hosts each function may fetch from.

-- A secret of an app: its name (^[A-Z][A-Z0-9_]{0,63}$, unique in the app) and its value, sealed
-- under the root key as webhook secrets are (never kept or answered in clear). A run's
-- context.secret(NAME) answers a placeholder; the value replaces it only in a header value of a
-- fetch to a host the function allows, as the request leaves the engine.
CREATE TABLE app_secrets (
    app_id TEXT NOT NULL REFERENCES apps (id),
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (app_id, name)
);

-- The hosts a function's context.fetch may reach: a JSON array of host names, each exact or
-- '*.' and a domain (every name under that domain).
ALTER TABLE functions ADD COLUMN allowed_hosts TEXT NOT NULL DEFAULT '[]';
