-- Revert runq:table_tool_calls from pg

BEGIN;

DROP TABLE runq.tool_calls;

COMMIT;
