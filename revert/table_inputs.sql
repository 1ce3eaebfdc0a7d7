-- Revert runq:table_inputs from pg

BEGIN;

DROP TABLE runq.inputs;

COMMIT;
