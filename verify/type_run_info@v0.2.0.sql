-- Verify runq:type_run_info on pg

BEGIN;

-- This version ends with usage, budget and deadline.
SELECT (NULL::runq.run_info).finished_at, (NULL::runq.run_info).usage,
       (NULL::runq.run_info).budget, (NULL::runq.run_info).deadline;

ROLLBACK;
