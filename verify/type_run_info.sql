-- Verify runq:type_run_info on pg

BEGIN;

-- This version ends with parent_run_id.
SELECT (NULL::runq.run_info).deadline, (NULL::runq.run_info).parent_run_id;

ROLLBACK;
