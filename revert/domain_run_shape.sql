-- Revert runq:domain_run_shape from pg

BEGIN;

DROP DOMAIN runq.consistent_run_shape;
DROP TYPE runq.run_shape;

COMMIT;
