-- Signing the command line in by the device flow (RFC 8628): a developer approves the user code
-- in the console, the command redeems its device code once for a developer token. Like
-- device_codes, without an app: the token acts as the developer, not as an installation.
CREATE TABLE cli_logins (
    code_hash TEXT PRIMARY KEY,
    user_code_hash TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
    user_id TEXT REFERENCES users (id) ON DELETE CASCADE,
    poll_interval INTEGER NOT NULL,
    last_polled_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX cli_logins_expiry ON cli_logins (expires_at);
