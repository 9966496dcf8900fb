-- Tenancy: settings, businesses, users, memberships, role permissions, apps, installations,
-- developer tokens, login sessions, and the event log (the transactional outbox).

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE businesses (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    sandbox BOOLEAN NOT NULL,
    plan TEXT NOT NULL CHECK (plan IN ('free', 'paid')),
    invoice_limit INTEGER,
    created_at REAL NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    name TEXT,
    created_at REAL NOT NULL
);

CREATE TABLE memberships (
    business_id TEXT NOT NULL REFERENCES businesses (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'accountant', 'viewer')),
    active BOOLEAN NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (business_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

CREATE TABLE role_permissions (
    business_id TEXT NOT NULL REFERENCES businesses (id),
    role TEXT NOT NULL,
    permissions TEXT NOT NULL,
    PRIMARY KEY (business_id, role)
);

CREATE TABLE apps (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('CONFIDENTIAL', 'PUBLIC')),
    client_secret_hash TEXT,
    redirect_uris TEXT NOT NULL,
    scopes TEXT NOT NULL,
    developer_user_id TEXT NOT NULL REFERENCES users (id),
    reviewed BOOLEAN NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'SUSPENDED', 'DEACTIVATED')),
    app_url TEXT,
    pinned_version TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX apps_developer ON apps (developer_user_id);

CREATE TABLE installations (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    business_id TEXT NOT NULL REFERENCES businesses (id),
    user_id TEXT NOT NULL REFERENCES users (id),
    scopes TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('ACTIVE', 'UNINSTALLED', 'REVOKED')),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (app_id, business_id)
);
CREATE INDEX installations_business ON installations (business_id);

CREATE TABLE developer_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id),
    created_at REAL NOT NULL
);

CREATE TABLE login_sessions (
    session_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id),
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX login_sessions_expiry ON login_sessions (expires_at);

CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    business_id TEXT REFERENCES businesses (id),
    app_id TEXT REFERENCES apps (id),
    type TEXT NOT NULL,
    api_version TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX events_business_seq ON events (business_id, seq);
CREATE INDEX events_created ON events (created_at);
