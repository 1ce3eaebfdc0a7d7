-- Revert runq:function__request_hash from pg

BEGIN;

DROP FUNCTION runq._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval);

COMMIT;
