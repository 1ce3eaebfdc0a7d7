-- Verify runq:type_run_event on pg

BEGIN;

SELECT NULL::runq.run_event;

ROLLBACK;
