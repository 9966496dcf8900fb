-- OAuth: authorization requests held for consent, codes, token families, refresh and access tokens.
-- Every token and code is stored only as a keyed hash.

CREATE TABLE authorization_requests (
    id_hash TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    redirect_uri TEXT NOT NULL,
    scopes TEXT NOT NULL,
    state TEXT,
    code_challenge TEXT,
    code_challenge_method TEXT,
    resource TEXT,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    consumed BOOLEAN NOT NULL
);
CREATE INDEX authorization_requests_expiry ON authorization_requests (expires_at);

CREATE TABLE authorization_codes (
    code_hash TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    installation_id TEXT NOT NULL REFERENCES installations (id),
    business_id TEXT NOT NULL REFERENCES businesses (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    redirect_uri TEXT NOT NULL,
    scopes TEXT NOT NULL,
    code_challenge TEXT,
    code_challenge_method TEXT,
    resource TEXT,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL,
    cancelled_at REAL,
    family_id TEXT
);
CREATE INDEX authorization_codes_installation ON authorization_codes (installation_id);

CREATE TABLE token_families (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    installation_id TEXT NOT NULL REFERENCES installations (id),
    business_id TEXT NOT NULL REFERENCES businesses (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    scopes TEXT NOT NULL,
    resource TEXT,
    grant_type TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL,
    revoked_reason TEXT
);
CREATE INDEX token_families_installation ON token_families (installation_id);
CREATE INDEX token_families_app_business ON token_families (app_id, business_id);

CREATE TABLE refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL REFERENCES token_families (id),
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL,
    revoked_at REAL
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE access_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL REFERENCES token_families (id),
    refresh_token_hash TEXT,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    revoked_at REAL
);
CREATE INDEX access_tokens_family ON access_tokens (family_id);
CREATE INDEX access_tokens_refresh ON access_tokens (refresh_token_hash);
CREATE INDEX access_tokens_expiry ON access_tokens (expires_at);

CREATE TABLE invoices (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    business_id TEXT NOT NULL REFERENCES businesses (id),
    number TEXT NOT NULL,
    customer_id TEXT,
    status TEXT NOT NULL,
    currency TEXT NOT NULL,
    total TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (business_id, number)
);
CREATE INDEX invoices_business_seq ON invoices (business_id, seq);
