-- Revert runq:grants_runq_worker_reads from pg

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

REVOKE EXECUTE ON FUNCTION runq.get_run(bigint), runq.run_events(bigint) FROM runq_worker;

COMMIT;
