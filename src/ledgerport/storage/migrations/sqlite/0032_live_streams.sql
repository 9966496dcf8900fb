-- Live streams of delivery attempts and runs as they end (contract.md, third round).
--
-- The one writer commits in order, so a stream's cursor is a number that grows with each
-- commit: an attempt's rowid (the index on app_id holds it), and a run's ended_seq, the next
-- number each time its end is recorded (the recording sets duration_ms and gives the lease
-- back). See queues/_streams.py.
CREATE INDEX webhook_attempts_stream ON webhook_attempts (app_id);

ALTER TABLE function_runs ADD COLUMN ended_seq INTEGER;
CREATE INDEX function_runs_ended ON function_runs (ended_seq);
CREATE INDEX function_runs_stream ON function_runs (app_id, ended_seq)
    WHERE ended_seq IS NOT NULL;
CREATE TRIGGER function_runs_ended AFTER UPDATE OF duration_ms ON function_runs
    WHEN OLD.lease IS NOT NULL AND NEW.lease IS NULL
BEGIN
    UPDATE function_runs
    SET ended_seq = (SELECT COALESCE(MAX(ended_seq), 0) + 1 FROM function_runs)
    WHERE id = NEW.id;
END;
