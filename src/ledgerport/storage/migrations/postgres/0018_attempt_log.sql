-- The attempt log: every attempt ever made for a webhook delivery, redeliveries included.
-- attempts_made counts them for the delivery and, unlike attempts (which a redelivery starts
-- afresh for the retry schedule), never goes back: an attempt's number continues across
-- redeliveries. A delivery's attempts so far are counted as made (their log was not kept).
ALTER TABLE webhook_deliveries ADD COLUMN attempts_made INTEGER NOT NULL DEFAULT 0;
UPDATE webhook_deliveries SET attempts_made = attempts;

-- One attempt: when it started, how long it took, the answer's status and the first 4 KiB of
-- its body as received (response_truncated when the body went on), or the error, and the
-- request's headers as sent, signature included (each attempt signs afresh; the secret is never
-- kept here). Written with the attempt's outcome, in the same statement; deleted with its
-- delivery.
CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    duration_ms DOUBLE PRECISION NOT NULL,
    response_code INTEGER,
    response_body BYTEA,
    response_truncated BOOLEAN NOT NULL,
    error TEXT,
    request_headers TEXT NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);
