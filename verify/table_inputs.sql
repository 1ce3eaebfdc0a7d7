-- Verify runq:table_inputs on pg

BEGIN;

SELECT run_id, seq, delivered_at, input
  FROM runq.inputs
 WHERE false;

ROLLBACK;
