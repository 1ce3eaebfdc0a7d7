-- Revert runq:function_end_tool from pg

BEGIN;

DROP FUNCTION runq.end_tool(bigint, bigint, text, jsonb);

COMMIT;
