-- Revert runq:domain_tool_call_status from pg

BEGIN;

DROP DOMAIN runq.tool_call_status;

COMMIT;
