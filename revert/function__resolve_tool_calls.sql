-- Revert runq:function__resolve_tool_calls from pg

BEGIN;

DROP FUNCTION runq._resolve_tool_calls(bigint[], timestamptz);

COMMIT;
