-- Deploy runq:grants_runq_worker_reads to pg
-- requires: function_get_run
-- requires: function_run_events
-- requires: role_runq_worker

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A worker whose connection broke after it sent a write does not know
-- whether the write committed: after a restart or a failover, the server may
-- have it and the answer be lost. Sending a complete, fail or release again
-- would be refused (and log a run.fenced no stale worker caused), a
-- record_usage counted twice. The worker settles it first by reading the
-- run (get_run: ended or queued under its epoch?) and its events (run_events:
-- how many run.usage of its epoch?). Both are STABLE reads; a worker can
-- already claim any run of its classes and read its payload. A GRANT on a
-- function takes no lock a caller waits on.
GRANT EXECUTE ON FUNCTION runq.get_run(bigint), runq.run_events(bigint) TO runq_worker;

COMMIT;
