-- Verify runq:table_tool_calls on pg

BEGIN;

SELECT run_id, call_id, epoch, started_at, finished_at, tool, idempotency, status, args, outcome
  FROM runq.tool_calls
 WHERE false;

ROLLBACK;
