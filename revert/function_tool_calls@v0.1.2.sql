-- Revert runq:function_tool_calls from pg

BEGIN;

DROP FUNCTION runq.tool_calls(bigint);

COMMIT;
