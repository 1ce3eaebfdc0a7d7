-- Revert runq:domain_tool_idempotency from pg

BEGIN;

DROP DOMAIN runq.tool_idempotency;

COMMIT;
