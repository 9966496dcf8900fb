-- Session-token signing keys, spent session-token ids, device codes and dynamic registration.

-- Apps registered at /oauth/register have no developer; their metadata is kept as registered.
-- SQLite cannot drop NOT NULL in place: the table is rebuilt (foreign keys are checked at the
-- end of the migration, as SQLite's documented procedure for table changes requires).
CREATE TABLE apps_rebuilt (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('CONFIDENTIAL', 'PUBLIC')),
    client_secret_hash TEXT,
    redirect_uris TEXT NOT NULL,
    scopes TEXT NOT NULL,
    developer_user_id TEXT REFERENCES users (id),
    reviewed BOOLEAN NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'SUSPENDED', 'DEACTIVATED')),
    app_url TEXT,
    pinned_version TEXT,
    created_at REAL NOT NULL,
    registration TEXT
);
INSERT INTO apps_rebuilt (id, client_id, name, type, client_secret_hash, redirect_uris, scopes,
    developer_user_id, reviewed, status, app_url, pinned_version, created_at)
    SELECT id, client_id, name, type, client_secret_hash, redirect_uris, scopes,
    developer_user_id, reviewed, status, app_url, pinned_version, created_at FROM apps;
DROP TABLE apps;
ALTER TABLE apps_rebuilt RENAME TO apps;
CREATE INDEX apps_developer ON apps (developer_user_id);

-- ES256 keys that sign session tokens. A key signs from activates_at until retires_at and is
-- published (JWKS) and accepted until expires_at, so tokens in flight outlive a rotation.
CREATE TABLE signing_keys (
    kid TEXT PRIMARY KEY,
    algorithm TEXT NOT NULL,
    private_key TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    created_at REAL NOT NULL,
    activates_at REAL NOT NULL,
    retires_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX signing_keys_expiry ON signing_keys (expires_at);

-- A session token's jti once presented for exchange, whatever the outcome.
CREATE TABLE spent_session_tokens (
    jti TEXT PRIMARY KEY,
    app_id TEXT NOT NULL,
    spent_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX spent_session_tokens_expiry ON spent_session_tokens (expires_at);

-- RFC 8628 device codes; status pending, approved, denied, consumed or cancelled.
CREATE TABLE device_codes (
    code_hash TEXT PRIMARY KEY,
    user_code_hash TEXT NOT NULL UNIQUE,
    app_id TEXT NOT NULL REFERENCES apps (id),
    scopes TEXT NOT NULL,
    resource TEXT,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed', 'cancelled')),
    poll_interval INTEGER NOT NULL,
    last_polled_at REAL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    decided_at REAL,
    user_id TEXT REFERENCES users (id),
    business_id TEXT REFERENCES businesses (id),
    installation_id TEXT REFERENCES installations (id),
    family_id TEXT
);
CREATE INDEX device_codes_installation ON device_codes (installation_id);
CREATE INDEX device_codes_expiry ON device_codes (expires_at);
