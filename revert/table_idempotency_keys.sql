-- Revert runq:table_idempotency_keys from pg

BEGIN;

DROP TABLE runq.idempotency_keys;

COMMIT;
