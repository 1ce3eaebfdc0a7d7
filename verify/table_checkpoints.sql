-- Verify runq:table_checkpoints on pg

BEGIN;

SELECT run_id, seq, epoch, created_at, state
  FROM runq.checkpoints
 WHERE false;

ROLLBACK;
