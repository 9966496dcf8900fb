-- Webhooks, their deliveries, and the dispatcher's pending marks.

-- A webhook of an app: its URL, the event types it subscribes to (a JSON array, in the order the
-- developer gave them) and its signing secret, encrypted under the root key. After a rotation
-- the previous secret keeps signing until previous_secret_expires_at. A deleted webhook keeps
-- its row (deleted_at set) so the deliveries still queued for it fail at send time.
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_secret_expires_at REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    deleted_at REAL
);
CREATE INDEX webhooks_app ON webhooks (app_id, created_at, id) WHERE deleted_at IS NULL;

-- One delivery of one event (or a test) to one webhook. body is the JSON body every attempt
-- sends, fixed at creation; each attempt signs it afresh. status: queued, retrying, delivered
-- or failed. next_attempt_at is when the next attempt is due while queued or retrying; a claim
-- moves it to the end of the claim's lease, so a delivery whose process died is due again then.
-- lease names the claim that may record the attempt's outcome.
CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id),
    app_id TEXT NOT NULL REFERENCES apps (id),
    event_id TEXT,
    business_id TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'retrying', 'delivered', 'failed')),
    attempts INTEGER NOT NULL,
    response_code INTEGER,
    last_error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    next_attempt_at REAL,
    first_attempt_at REAL,
    lease TEXT
);
-- The hot queue: only deliveries waiting for an attempt are in this index, so claiming due work
-- never reads the delivered and failed history.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status IN ('queued', 'retrying');
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
-- An engine renews and gives back its claims by its lease.
CREATE INDEX webhook_deliveries_lease ON webhook_deliveries (lease) WHERE lease IS NOT NULL;

-- Events the dispatcher has not fanned out yet, in the order they were recorded (a business's
-- events are marked in their seq order). Fan-out deletes the marks in the transaction that
-- creates the deliveries: what is marked here is the dispatcher's cursor.
CREATE TABLE event_dispatch (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE
);
