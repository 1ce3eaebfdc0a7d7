-- Revert runq:function_begin_tool from pg

BEGIN;

DROP FUNCTION runq.begin_tool(bigint, bigint, text, text, text, jsonb);

COMMIT;
