-- The Events API pages an app's view of a business's event log, oldest first. The view is a set
-- of event types (those its scopes open, and its own app events): the feed reads each visible
-- type from its own ordered range of these indexes, at most a page of each, so a page costs
-- the same whatever the size of the log and however rare the visible types are in it. Each
-- index holds created_at too, so the retention limit is checked without reading the rows.
CREATE INDEX events_feed ON events (business_id, type, seq, created_at);

-- App events (app_id set) are read per app: another app's events of the same type are never
-- walked past.
CREATE INDEX events_app_feed ON events (app_id, business_id, type, seq, created_at)
    WHERE app_id IS NOT NULL;
