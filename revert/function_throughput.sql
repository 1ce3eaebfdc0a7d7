-- Revert runq:function_throughput from pg

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP FUNCTION runq.throughput(timestamptz);

COMMIT;
