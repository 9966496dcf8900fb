-- Marketplace listings: one per app, its slug (unique), the revision that is live, and the
-- revisions themselves, numbered per listing. A revision moves draft -> submitted ->
-- in_review -> approved (it goes live), rejected or changes_requested; the latest revision
-- that is not approved is the open one, which the developer edits.
CREATE TABLE listings (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL UNIQUE REFERENCES apps (id),
    slug TEXT NOT NULL UNIQUE,
    live_revision_id TEXT,
    -- When the first save wrote the listing, by the server's own clock (time.time()): a save
    -- that arrived before then raced that first save (LISTING_EXISTS).
    first_saved_wall DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE listing_revisions (
    id TEXT PRIMARY KEY,
    listing_id TEXT NOT NULL REFERENCES listings (id),
    number INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('draft', 'submitted', 'in_review', 'changes_requested',
        'rejected', 'approved')),
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    tagline TEXT NOT NULL,
    description TEXT NOT NULL,
    category TEXT NOT NULL,
    icon_asset_id TEXT,
    screenshot_asset_ids TEXT NOT NULL,
    note TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    UNIQUE (listing_id, number)
);
