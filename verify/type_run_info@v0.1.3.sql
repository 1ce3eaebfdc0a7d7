-- Verify runq:type_run_info on pg

BEGIN;

SELECT NULL::runq.run_info;

ROLLBACK;
