-- Session-token signing keys, spent session-token ids, device codes and dynamic registration.

-- Apps registered at /oauth/register have no developer; their metadata is kept as registered.
ALTER TABLE apps ALTER COLUMN developer_user_id DROP NOT NULL;
ALTER TABLE apps ADD COLUMN registration TEXT;

-- ES256 keys that sign session tokens. A key signs from activates_at until retires_at and is
-- published (JWKS) and accepted until expires_at, so tokens in flight outlive a rotation.
CREATE TABLE signing_keys (
    kid TEXT PRIMARY KEY,
    algorithm TEXT NOT NULL,
    private_key TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    activates_at DOUBLE PRECISION NOT NULL,
    retires_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX signing_keys_expiry ON signing_keys (expires_at);

-- A session token's jti once presented for exchange, whatever the outcome.
CREATE TABLE spent_session_tokens (
    jti TEXT PRIMARY KEY,
    app_id TEXT NOT NULL,
    spent_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
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
    last_polled_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    decided_at DOUBLE PRECISION,
    user_id TEXT REFERENCES users (id),
    business_id TEXT REFERENCES businesses (id),
    installation_id TEXT REFERENCES installations (id),
    family_id TEXT
);
CREATE INDEX device_codes_installation ON device_codes (installation_id);
CREATE INDEX device_codes_expiry ON device_codes (expires_at);
