-- Live streams of delivery attempts and runs as they end (contract.md, third round).
--
-- A stream's cursor is (ended_xid, ended_seq): the transaction that recorded the end and a
-- number drawn as it did. Sequence numbers are drawn before commits, which may land in another
-- order, so a reader takes only rows whose transaction is older than every transaction still
-- running (pg_snapshot_xmin of its snapshot): none of those can commit any more, so no row ever
-- appears behind a cursor already passed, and a resumed stream misses nothing
-- (queues/_streams.py). An attempt gets both as it is logged; a run each time its end is
-- recorded (the recording sets duration_ms and gives the lease back). The trigger is created
-- "OR REPLACE": migrations are split into statements as SQLite reads them, which would wait for
-- a plain CREATE TRIGGER's END.
CREATE SEQUENCE stream_seq;

ALTER TABLE webhook_attempts
    ADD COLUMN ended_xid BIGINT NOT NULL DEFAULT (pg_current_xact_id()::text::bigint);
ALTER TABLE webhook_attempts ADD COLUMN ended_seq BIGINT NOT NULL DEFAULT nextval('stream_seq');
CREATE INDEX webhook_attempts_stream ON webhook_attempts (app_id, ended_xid, ended_seq);

ALTER TABLE function_runs ADD COLUMN ended_xid BIGINT;
ALTER TABLE function_runs ADD COLUMN ended_seq BIGINT;
CREATE INDEX function_runs_stream ON function_runs (app_id, ended_xid, ended_seq)
    WHERE ended_seq IS NOT NULL;

CREATE FUNCTION function_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.ended_xid := pg_current_xact_id()::text::bigint;
    NEW.ended_seq := nextval('stream_seq');
    RETURN NEW;
END;
$$;
CREATE OR REPLACE TRIGGER function_runs_ended BEFORE UPDATE OF duration_ms ON function_runs
    FOR EACH ROW WHEN (OLD.lease IS NOT NULL AND NEW.lease IS NULL)
    EXECUTE FUNCTION function_run_ended();
