-- The stack of what a hosted function's handler threw, kept with its run for the run's own page
-- (the error message alone says what, the stack says where).
ALTER TABLE function_runs ADD COLUMN error_stack TEXT;
