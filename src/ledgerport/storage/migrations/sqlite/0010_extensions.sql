-- An app's UI extensions: a page of the app (a path on its App URL's origin) shown at one of the
-- service's extension targets, with a label; at most one per target.
CREATE TABLE app_extensions (
    app_id TEXT NOT NULL REFERENCES apps (id),
    target TEXT NOT NULL,
    path TEXT NOT NULL,
    label TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (app_id, target)
);
