-- Webhook endpoints beyond the spec (contract.md, third round): a signature scheme, receiver
-- controls, ordering by record, the endpoint's lifecycle and health, and the app's operational
-- endpoint.

-- kind: 'endpoint' (an app's webhook, as the spec has them) or 'operational' (the app's one
-- operational endpoint: it receives the lifecycle events of the app's endpoints; never listed
-- with them, subscribes to no event of the log). signature: 'stripe', 'standard' or
-- 'standard-asymmetric'; secret and previous_secret keep that scheme's key, sealed. rate_limit:
-- attempts a second at most (NULL: no limit); ordering: 'none' or 'record'; headers: a JSON
-- object sent with every attempt. public_key: a standard-asymmetric endpoint's public key
-- (whpk_...), which it answers; previous_public_key the one before a rotation, while the previous
-- key still signs.
ALTER TABLE webhooks ADD COLUMN public_key TEXT;
ALTER TABLE webhooks ADD COLUMN previous_public_key TEXT;
ALTER TABLE webhooks ADD COLUMN kind TEXT NOT NULL DEFAULT 'endpoint';
ALTER TABLE webhooks ADD COLUMN signature TEXT NOT NULL DEFAULT 'stripe';
ALTER TABLE webhooks ADD COLUMN rate_limit INTEGER;
ALTER TABLE webhooks ADD COLUMN ordering TEXT NOT NULL DEFAULT 'none';
ALTER TABLE webhooks ADD COLUMN headers TEXT NOT NULL DEFAULT '{}';
-- The lifecycle: why the engine switched the endpoint off ('gone', 'failing'; NULL when the
-- app did, or while it is on) and when; the health kept as outcomes are recorded: 'healthy' or
-- 'failing' (its last delivery failed for good and none was delivered since), the deliveries
-- failed for good since the last one delivered, the last delivered one, the last error, when
-- the endpoint was last switched on (the disable rule's window starts then at the earliest),
-- when its current run of failures began, and the times of its last three deliveries failed for
-- good (a JSON array).
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT;
ALTER TABLE webhooks ADD COLUMN disabled_at REAL;
ALTER TABLE webhooks ADD COLUMN health TEXT NOT NULL DEFAULT 'healthy';
ALTER TABLE webhooks ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN last_delivery_at REAL;
ALTER TABLE webhooks ADD COLUMN last_error TEXT;
ALTER TABLE webhooks ADD COLUMN switched_on_at REAL;
ALTER TABLE webhooks ADD COLUMN failing_since REAL;
ALTER TABLE webhooks ADD COLUMN recent_failures TEXT NOT NULL DEFAULT '[]';
UPDATE webhooks SET switched_on_at = created_at;

-- Deliveries delivered and failed for good per endpoint and hour (hour: unix seconds // 3600),
-- counted as outcomes are recorded; the health's last 24 hours sum the newest 24.
CREATE TABLE webhook_health_hours (
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    hour INTEGER NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (webhook_id, hour)
);

-- Ordering by record: a delivery to an endpoint with ordering 'record' keeps its event's record
-- (data.id) in order_key and its event's place in the log in event_seq. Of one endpoint's open
-- deliveries about one record, one at a time is due (the head); the others wait with no
-- next_attempt_at until the one before them ends, then the oldest by event_seq is due.
ALTER TABLE webhook_deliveries ADD COLUMN order_key TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN event_seq INTEGER;
CREATE UNIQUE INDEX webhook_deliveries_record_head ON webhook_deliveries (webhook_id, order_key)
    WHERE order_key IS NOT NULL AND status IN ('queued', 'retrying')
    AND next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_record_open
    ON webhook_deliveries (webhook_id, order_key, event_seq)
    WHERE order_key IS NOT NULL AND status IN ('queued', 'retrying');

-- An endpoint's rate limit, shared by every process: attempts started per endpoint and second.
CREATE TABLE webhook_send_counts (
    webhook_id TEXT NOT NULL,
    second INTEGER NOT NULL,
    started INTEGER NOT NULL,
    PRIMARY KEY (webhook_id, second)
);

-- Operational events of an app's endpoints (webhook.endpoint.failing, .disabled, .recovered):
-- the console shows them; the app's operational endpoint, when it has one, receives each as a
-- delivery.
CREATE TABLE operational_events (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES apps (id),
    webhook_id TEXT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX operational_events_app ON operational_events (app_id, created_at);
