-- Pushed authorization requests (RFC 9126): a client's checked authorization request, kept 60
-- seconds under the keyed hash of the request_uri that stands for it, used once by
-- /oauth/authorize. The cleanup purges them by expires_at.
CREATE TABLE pushed_requests (
    uri_hash TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    args TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    used BOOLEAN NOT NULL
);
CREATE INDEX pushed_requests_expiry ON pushed_requests (expires_at);
