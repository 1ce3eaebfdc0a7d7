-- Verify runq:table_idempotency_keys on pg

BEGIN;

SELECT tenant_id, principal_id, idempotency_key, request_hash, run_id, created_at
  FROM runq.idempotency_keys
 WHERE false;

ROLLBACK;
