-- Stream endpoints (contract.md: ledgerport listen): webhooks of kind 'stream', whose deliveries
-- their listener pulls over HTTP instead of the engine posting them. stream_seen_at: when a
-- listener last pulled (or the endpoint was made); one unseen for an hour is abandoned, and the
-- scheduler deletes it and fails what waits for it.
ALTER TABLE webhooks ADD COLUMN stream_seen_at DOUBLE PRECISION;
-- A delivery to a stream endpoint never has a next_attempt_at (so no engine claims it): while it
-- waits for its listener, stream_due_at is when it may be leased next (while leased: when the
-- lease runs out); NULL for every other delivery, and once it is delivered or failed.
ALTER TABLE webhook_deliveries ADD COLUMN stream_due_at DOUBLE PRECISION;
CREATE INDEX webhook_deliveries_stream_due ON webhook_deliveries (webhook_id, stream_due_at)
    WHERE stream_due_at IS NOT NULL;
