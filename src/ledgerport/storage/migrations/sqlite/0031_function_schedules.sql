-- Schedules of hosted functions (contract.md, third round): five cron fields, UTC, and the tick
-- each function's schedule is due at next.

-- A function's schedule as uploaded (NULL: it has none), and its next tick not run yet, in Unix
-- seconds (NULL: no schedule, or the function is deleted). A tick is run by the transaction that
-- moves schedule_next_at past it, from the value it read (a compare-and-set): that transaction
-- queues the tick's runs, one per ACTIVE installation, so however many processes tick, one of
-- them runs it and the others find it moved.
ALTER TABLE functions ADD COLUMN schedule TEXT;
ALTER TABLE functions ADD COLUMN schedule_next_at REAL;

-- The ticker's look for due schedules: one index step per due function.
CREATE INDEX functions_schedule_due ON functions (schedule_next_at)
    WHERE schedule_next_at IS NOT NULL;
