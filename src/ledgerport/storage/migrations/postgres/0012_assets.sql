-- An app's uploaded images for its marketplace listing (icons, screenshots): PNG or JPEG, at
-- most 1 MiB, kept in the database with their type, size and digest.
CREATE TABLE app_assets (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    content_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    data BYTEA NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX app_assets_app ON app_assets (app_id, created_at);
